package status

// Extension sections: an extension's State() appears in Report.Extensions under its Name().
// Build reads the sections below, by their JSON, into the containers; others are kept as
// they are. An extension may return these types or its own with the same JSON.
const (
	SectionEPC       = "epc"
	SectionCoreSched = "coresched"
)

// EPC is the "epc" section (package epc/enforce): SGX EPC limits.
type EPC struct {
	Supported     bool           `json:"supported"`
	Reason        string         `json:"reason,omitempty"` // why limits cannot be enforced
	Policy        string         `json:"policy"`
	CapacityBytes uint64         `json:"capacityBytes,omitempty"`
	Containers    []EPCContainer `json:"containers,omitempty"`
}

// EPCContainer is one container's SGX EPC limit and use.
type EPCContainer struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	// LimitBytes is the limit asked for (0: none); InForce says misc.max holds it.
	LimitBytes uint64 `json:"limitBytes,omitempty"`
	InForce    bool   `json:"inForce"`
	// UsageBytes is misc.current at the time of the report; nil when unread.
	UsageBytes *uint64 `json:"usageBytes,omitempty"`
}

// CoreSched is the "coresched" section: the core-scheduling group of each container.
type CoreSched struct {
	Containers []CoreSchedContainer `json:"containers,omitempty"`
}

// CoreSchedContainer is one container's group and cookie state.
type CoreSchedContainer struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Group     string `json:"group"`
	State     string `json:"state,omitempty"`
}
