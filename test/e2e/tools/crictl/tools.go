//go:build tools

// Package tools pins crictl for the e2e harness. `go install
// sigs.k8s.io/cri-tools/cmd/crictl@version` is refused by the module proxy, so
// test/e2e/tools.sh builds crictl from this wrapper module instead:
//
//	cd test/e2e/tools/crictl && go build -o <bin>/crictl sigs.k8s.io/cri-tools/cmd/crictl
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
