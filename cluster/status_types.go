package cluster

import "github.com/intentledger/intentd/clusterview"

// The plain data the node shows the API is declared in package
// clusterview, a leaf the API imports instead of this package; these
// aliases keep the names here.

// Status describes the cluster as one node sees it (Node.Status); GET
// /v1/cluster serves it as JSON (clusterview.Status).
type Status = clusterview.Status

// MemberStatus is one member: in the Raft configuration, in gossip, or
// both (clusterview.MemberStatus).
type MemberStatus = clusterview.MemberStatus
