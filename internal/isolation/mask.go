package isolation

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// MaxMaskCPUs bounds the CPUs a mask may name (the kernel's NR_CPUS is at most 8192).
const MaxMaskCPUs = 8192

// ParseMask reads a Linux hexadecimal CPU mask as /proc/irq/default_smp_affinity and
// /sys/devices/virtual/workqueue/cpumask show it: 32-bit words, most significant first,
// separated by commas ("00000000,0000000f" is CPUs 0-3).
func ParseMask(s string) (cpuset.CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return cpuset.New(), errors.New("empty CPU mask (want hexadecimal words such as 0000000f or ff,ffffffff)")
	}
	words := strings.Split(s, ",")
	if len(words)*32 > MaxMaskCPUs {
		return cpuset.New(), fmt.Errorf("CPU mask %.40q has %d words, over %d CPUs", s, len(words), MaxMaskCPUs)
	}
	var cpus []int
	for i, w := range words {
		if w == "" || len(w) > 8 {
			return cpuset.New(), fmt.Errorf("CPU mask %.40q: word %d %q is not 1 to 8 hexadecimal digits", s, i+1, w)
		}
		v, err := strconv.ParseUint(w, 16, 32)
		if err != nil {
			return cpuset.New(), fmt.Errorf("CPU mask %.40q: word %d %q is not hexadecimal", s, i+1, w)
		}
		base := (len(words) - 1 - i) * 32
		for v != 0 {
			b := bits.TrailingZeros64(v)
			cpus = append(cpus, base+b)
			v &^= 1 << b
		}
	}
	return cpuset.New(cpus...), nil
}

// FormatMask writes cpus as a Linux hexadecimal CPU mask of 32-bit words, as many as the
// highest CPU needs (at least one): the kernel accepts fewer words than it prints.
func FormatMask(cpus cpuset.CPUSet) string {
	list := cpus.List()
	n := 1
	if len(list) > 0 {
		n = list[len(list)-1]/32 + 1
	}
	words := make([]uint32, n)
	for _, c := range list {
		words[n-1-c/32] |= 1 << (c % 32)
	}
	parts := make([]string, n)
	for i, w := range words {
		parts[i] = fmt.Sprintf("%08x", w)
	}
	return strings.Join(parts, ",")
}
