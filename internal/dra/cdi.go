package dra

import (
	"encoding/json"
	"fmt"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/podfence/podfence/internal/dra/grant"
)

// CDIVersion is the CDI spec version CDISpec writes: 0.5.0 is the first that allows device
// names starting with a digit (claim UIDs do); 0.6.0 is read by containerd 1.7 and later.
const CDIVersion = "0.6.0"

// CDISpec is the CDI spec file of a prepared claim (https://github.com/cncf-tags/container-device-interface):
// kind CDIKind, one device named by the claim UID whose only container edit is the
// environment marker grant.EnvName(uid)=<uid>, which tells the node agent which grant the
// container uses.
func CDISpec(claimUID string) ([]byte, error) {
	if err := grant.CheckUID("claim UID", claimUID); err != nil {
		return nil, fmt.Errorf("CDI spec: %w", err)
	}
	spec := cdispec.Spec{Version: CDIVersion, Kind: CDIKind, Devices: []cdispec.Device{{
		Name:           claimUID,
		ContainerEdits: cdispec.ContainerEdits{Env: []string{grant.EnvName(claimUID) + "=" + claimUID}},
	}}}
	return json.Marshal(spec)
}
