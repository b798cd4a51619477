package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// realShapedPod builds a ReplicaSet's pod as the API server hands it to admission webhooks,
// defaulted; its pool, EPC, CPU and memory resources are valid, pools those of testConfig.
func realShapedPod(s *byteSource) *corev1.Pod {
	hash := s.hex(5)
	rs := s.pick("web", "dpdk-router", "batch-job") + "-" + hash
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: rs + "-", Namespace: s.pick("telco", "batch", "tenant-a", "prod"), UID: types.UID(s.uuid()),
			CreationTimestamp: metav1.Unix(1_700_000_000+int64(s.byte()), 0),
			Labels: map[string]string{"app": "web", "pod-template-hash": hash, "tier": s.pick("dataplane", "web", "debug"),
				"build": s.numberish()},
			Annotations: map[string]string{"example.com/revision": s.numberish(), "checksum/config": s.hex(32)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs,
				UID: types.UID(s.uuid()), Controller: new(true), BlockOwnerDeletion: new(true)}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler",
			ServiceAccountName: "default", TerminationGracePeriodSeconds: new(int64(30)), EnableServiceLinks: new(true),
			PreemptionPolicy: new(corev1.PreemptLowerPriority), Priority: new(int32(0)),
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))}},
			Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64(3607))}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
						FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}, DefaultMode: new(int32(420))}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable},
	}
	if s.intn(2) == 0 {
		pod.Name = rs + "-" + s.hex(3)
	}
	if s.intn(4) == 0 {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: new(resource.MustParse(s.pick("64Mi", "1Gi", "500M")))}}})
	}
	if s.intn(3) == 0 {
		pod.Spec.InitContainers = []corev1.Container{realContainer(s, "init")}
	}
	for i := range 1 + s.intn(3) {
		pod.Spec.Containers = append(pod.Spec.Containers, realContainer(s, fmt.Sprintf("c%d", i)))
	}
	return pod
}

// realContainer builds a container with env values, arguments and probes that may read as
// numbers, and valid resources.
func realContainer(s *byteSource, name string) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.example/app:" + s.digits(3),
		Command: []string{"/app"}, Args: []string{"--id", s.numberish()},
		Ports:                    []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		ImagePullPolicy:          corev1.PullIfNotPresent,
		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{"sh", "-c", "test -e /tmp/" + s.numberish()}}},
			PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/ready?v=" + s.numberish(), Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}},
			PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
	}
	for i := range s.intn(4) {
		c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("VAR_%d", i), Value: s.numberish()})
	}
	if s.intn(3) == 0 {
		c.Env = append(c.Env, corev1.EnvVar{Name: "MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
			Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}})
	}
	lim, req := corev1.ResourceList{}, corev1.ResourceList{}
	set := func(name, v string, request bool) {
		lim[corev1.ResourceName(name)] = resource.MustParse(v)
		if request {
			req[corev1.ResourceName(name)] = resource.MustParse(v)
		}
	}
	set("cpu", s.pick("100m", "250m", "1", "1500m", "2"), true)
	set("memory", s.pick("64Mi", "128974848", "1Gi", "129e6", "512M"), s.intn(2) == 0)
	domain := s.pick("podfence.io/", "nokia.k8s.io/")
	pools := s.intn(4) // none, exclusive, shared, both
	if pools&1 != 0 {
		set(domain+s.pick("exclusive_dp", "exclusive_rt"), fmt.Sprint(1+s.intn(4)), s.intn(2) == 0)
	}
	if pools&2 != 0 {
		set(domain+s.pick("shared_caas", "shared_web"), fmt.Sprint(100*(1+s.intn(20))), s.intn(2) == 0)
	}
	if s.intn(4) == 0 {
		set(ResourceEPC, s.pick("4Ki", "1Mi", "64Mi", "33554432"), s.intn(2) == 0)
	}
	c.Resources = corev1.ResourceRequirements{Limits: lim, Requests: req}
	return c
}
