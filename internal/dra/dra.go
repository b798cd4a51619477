// Package dra is the pure core of podfence's DRA driver (podfence-dra, driver name
// dra.podfence.io; https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/).
//
// From a node's topology, its resolved pool layout and its SGX EPC capacity, NewInventory
// works out what the driver publishes in its one resource pool (named after the node):
//
//   - one device per request unit of each exclusive pool with requestAPI: dra, named
//     cpu-<lowest CPU of the unit>. A unit is what the pool's hyperThreadingPolicy gives a
//     container for one device: under singleThreaded one thread (its siblings stay idle for
//     the container), under multiThreaded (CPU-Pooler's "cores" meaning) the whole core;
//   - the shared pool, when it is a DRA pool: one device shared-<pool>, allocatable many
//     times, with the consumable capacity dra.podfence.io/millicpu (the pool's CPUs x 1000);
//   - SGX EPC when the node has at least two pages: one device sgx-epc, allocatable many times, with the
//     consumable capacity dra.podfence.io/epc in bytes.
//
// Inventory.Devices renders them as resource.k8s.io/v1 devices with topology attributes (see
// the Attr constants). Inventory.Grant turns a claim's allocation results into the
// grant.Grant the node agent enforces, after checking them against the devices and against
// the other claims' grants. The package reads no files and never logs.
package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

// DriverName is the DRA driver's name, the domain of its attributes and capacities.
const DriverName = "dra.podfence.io"

// Device attributes. Every exclusive unit has all of them but AttrDie, which is published
// only where some socket has more than one die. The shared device has AttrPool, AttrSMT and,
// when all its CPUs are on one NUMA node or socket, those. The EPC device has none.
const (
	AttrPool      resourceapi.QualifiedName = DriverName + "/pool"      // string: the pool config's pool name
	AttrCPUs      resourceapi.QualifiedName = DriverName + "/cpus"      // string: the CPUs the unit gives, a Linux CPU list
	AttrThreads   resourceapi.QualifiedName = DriverName + "/threads"   // int: how many CPUs the unit gives
	AttrCoreID    resourceapi.QualifiedName = DriverName + "/coreID"    // int: the core's lowest online thread
	AttrSocket    resourceapi.QualifiedName = DriverName + "/socket"    // int: physical package
	AttrNUMANode  resourceapi.QualifiedName = DriverName + "/numaNode"  // int: NUMA node
	AttrL3CacheID resourceapi.QualifiedName = DriverName + "/l3CacheID" // int: the L3 group's lowest CPU
	AttrDie       resourceapi.QualifiedName = DriverName + "/die"       // int: die in the socket
	AttrSMT       resourceapi.QualifiedName = DriverName + "/smt"       // bool: the node has SMT on
	AttrWholeCore resourceapi.QualifiedName = DriverName + "/wholeCore" // bool: the unit gives every online thread of its core

	// AttrStandardNUMANode is Kubernetes' cross-driver NUMA attribute (scalar form), for
	// matchAttribute constraints with other drivers' devices.
	AttrStandardNUMANode = deviceattribute.StandardDeviceAttributeNUMANode
)

// Consumable capacities of the shared and EPC devices.
const (
	CapMilliCPU resourceapi.QualifiedName = DriverName + "/millicpu" // shared pool share, in millicpu
	CapEPC      resourceapi.QualifiedName = DriverName + "/epc"      // SGX EPC, in bytes
)

// Device names and their prefixes.
const (
	unitPrefix   = "cpu-"
	sharedPrefix = "shared-"
	// EPCDevice names the SGX EPC device.
	EPCDevice = "sgx-epc"
)

// The EPC device's request policy: whole 4 KiB pages, one page when a request names no
// amount (a claim that forgets the amount does not take the node's EPC).
const epcPage = 4096

// CDI: the CDI device of a prepared claim is <CDIKind>=<claim UID>.
const CDIKind = DriverName + "/claim"

// CDIDeviceID is the CDI device ID that stands for a prepared claim.
func CDIDeviceID(claimUID string) string { return CDIKind + "=" + claimUID }

// CDISpecFile is the name of the claim's CDI spec file in the CDI directory.
func CDISpecFile(claimUID string) string { return DriverName + "-" + claimUID + ".json" }
