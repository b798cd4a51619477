package epc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/podapi"
)

const want = `want a whole number of bytes, decimal ("1048576") or a Kubernetes quantity ("1Mi", "64M"); 0 means no limit`

func TestParseLimit(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       uint64
		wantErr    string // the error up to the allowed forms, which every error ends with
	}{
		{name: "decimal", text: "1048576", want: 1 << 20},
		{name: "zero", text: "0", want: 0},
		{name: "max uint64", text: "18446744073709551615", want: 1<<64 - 1},
		{name: "binary suffix", text: "1Mi", want: 1 << 20},
		{name: "decimal suffix", text: "64M", want: 64_000_000},
		{name: "Gi", text: "2Gi", want: 2 << 30},
		{name: "fraction that is whole", text: "0.5Ki", want: 512},
		{name: "exponent", text: "1e3", want: 1000},
		{name: "white space", text: " 4096\n", want: 4096},
		{name: "zero quantity", text: "0Mi", want: 0},

		{name: "empty", text: "", wantErr: "empty value"},
		{name: "blank", text: "  ", wantErr: "empty value"},
		{name: "word", text: "lots", wantErr: "not a number of bytes"},
		{name: "exponent too costly to parse", text: "1e-999999999", wantErr: "not a number of bytes"},
		{name: "negative", text: "-1", wantErr: "negative"},
		{name: "negative quantity", text: "-1Mi", wantErr: "negative"},
		{name: "milli", text: "100m", wantErr: "not a whole number of bytes"},
		{name: "fraction", text: "1.5", wantErr: "not a whole number of bytes"},
		{name: "huge quantity", text: "16Ei", wantErr: "too large for a quantity (decimal bytes go up to 2^64-1)"},
		{name: "over uint64", text: "18446744073709551616", wantErr: "too large for a quantity (decimal bytes go up to 2^64-1)"},
		{name: "sign without number", text: "-Mi", wantErr: "not a number of bytes"},
		{name: "unit without number", text: "Mi", wantErr: "not a number of bytes"},
		{name: "long", text: strings.Repeat("1", 65), wantErr: "value is 65 bytes long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := epc.ParseLimit(tc.text)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr+": "+want {
					t.Fatalf("ParseLimit(%q) = %v, %v; want error %q", tc.text, l, err, tc.wantErr+": "+want)
				}
				return
			}
			if err != nil || l.Bytes() != tc.want {
				t.Fatalf("ParseLimit(%q) = %v, %v; want %d", tc.text, l, err, tc.want)
			}
			if l.IsSet() != (tc.want > 0) {
				t.Errorf("IsSet = %v for %d bytes", l.IsSet(), tc.want)
			}
			if back, err := epc.ParseLimit(l.String()); err != nil || back != l {
				t.Errorf("round trip of %q through %q: %v, %v", tc.text, l.String(), back, err)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	const (
		ctrKey = "epc-limit.nri.io/container.app"
		podKey = "epc-limit.nri.io/pod"
		anyKey = "epc-limit.nri.io"
	)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        uint64
		wantKey     string
		wantErr     string
	}{
		{name: "none", annotations: nil},
		{name: "unrelated", annotations: map[string]string{"epc-limit.nri.io/container.other": "5", "x": "y"}},
		{name: "container", annotations: map[string]string{ctrKey: "1Mi", podKey: "2Mi", anyKey: "3Mi"},
			want: 1 << 20, wantKey: ctrKey},
		{name: "pod", annotations: map[string]string{podKey: "2Mi", anyKey: "3Mi"}, want: 2 << 20, wantKey: podKey},
		{name: "bare key", annotations: map[string]string{anyKey: "3145728"}, want: 3 << 20, wantKey: anyKey},
		{name: "zero on the container overrides the pod", annotations: map[string]string{ctrKey: "0", podKey: "2Mi"},
			want: 0, wantKey: ctrKey},
		{name: "bad container value", annotations: map[string]string{ctrKey: "1 MiB", podKey: "2Mi"},
			wantKey: ctrKey, wantErr: `annotation epc-limit.nri.io/container.app="1 MiB": not a number of bytes: ` + want},
		{name: "bad pod value", annotations: map[string]string{podKey: "-4"},
			wantKey: podKey, wantErr: `annotation epc-limit.nri.io/pod="-4": negative: ` + want},
		{name: "long value is cut in the message", annotations: map[string]string{anyKey: strings.Repeat("9", 250)},
			wantKey: anyKey, wantErr: `annotation epc-limit.nri.io="` + strings.Repeat("9", 200) + `…": value is 250 bytes long: ` + want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, key, err := epc.Resolve(tc.annotations, "app")
			if key != tc.wantKey {
				t.Errorf("key %q, want %q", key, tc.wantKey)
			}
			if tc.wantErr != "" {
				var ae *podapi.AnnotationError
				if !errors.As(err, &ae) || ae.Key != tc.wantKey || ae.Value != tc.annotations[tc.wantKey] {
					t.Fatalf("error %#v, want an *AnnotationError for %s", err, tc.wantKey)
				}
				if err.Error() != tc.wantErr {
					t.Errorf("error\n%s\nwant\n%s", err, tc.wantErr)
				}
				return
			}
			if err != nil || l.Bytes() != tc.want {
				t.Errorf("got %v, %v; want %d", l, err, tc.want)
			}
		})
	}
}

func TestLimitText(t *testing.T) {
	var zero epc.Limit
	if zero.IsSet() || zero.String() != "0" || zero != epc.Bytes(0) {
		t.Errorf("zero Limit: IsSet %v, String %q", zero.IsSet(), zero.String())
	}
	if got := epc.Bytes(4096).MiscMax(); got != "sgx_epc 4096" {
		t.Errorf("MiscMax = %q", got)
	}
}
