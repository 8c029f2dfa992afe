package httpapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/clusterview"
)

// Answer codes of the operator's membership endpoints (docs/problems.md).
const (
	// CodeUnknownPeer (404): the node named is not a server of the Raft
	// configuration.
	CodeUnknownPeer = "unknown_peer"
	// CodePeerIsLeader (409): a removal of the leader itself; transfer
	// leadership first.
	CodePeerIsLeader = "peer_is_leader"
	// CodeNoLiveMajority (409): the voters left by the removal would not
	// include a majority the leader hears from.
	CodeNoLiveMajority = "no_live_majority"
	// CodeNotVoter (409): a leadership transfer to a server that is not a
	// voter.
	CodeNotVoter = "not_voter"
)

// PeerAdmin changes the cluster's membership and leadership at an
// operator's request; cluster.Node implements it (node asserts
// it at compile time), and its refusals are clusterview's errors. Both
// calls run on the leader: a follower answers *ledger.NotLeaderError, and
// the request is forwarded to the leader as other admin writes are.
type PeerAdmin interface {
	// RemovePeer removes server id from the Raft configuration.
	RemovePeer(ctx context.Context, id string) error
	// TransferLeadership hands leadership to server to ("" : any voter)
	// and returns the leader known afterwards.
	TransferLeadership(ctx context.Context, to string) (string, error)
}

// transferBody is the body of POST /v1/cluster/leader/transfer.
type transferBody struct {
	// To is the voter to hand leadership to; empty lets Raft pick the
	// most up-to-date voter.
	To string `json:"to,omitempty"`
}

// peerAdmin is the cluster as a PeerAdmin, nil when it is not one.
func (s *Server) peerAdmin() PeerAdmin {
	pa, _ := s.cluster.(PeerAdmin)
	return pa
}

// peerFail answers an error of a PeerAdmin call: its refusals (the peer
// codes), else as any ledger error (a follower forwards to the leader).
func (s *Server) peerFail(c echo.Context, err error, body []byte) error {
	switch {
	case errors.Is(err, clusterview.ErrUnknownPeer):
		return s.writeProblem(c, newProblem(CodeUnknownPeer, err.Error()))
	case errors.Is(err, clusterview.ErrRemoveLeader):
		return s.writeProblem(c, newProblem(CodePeerIsLeader, err.Error()))
	case errors.Is(err, clusterview.ErrNoLiveMajority):
		return s.writeProblem(c, newProblem(CodeNoLiveMajority, err.Error()))
	case errors.Is(err, clusterview.ErrNotVoter):
		return s.writeProblem(c, newProblem(CodeNotVoter, err.Error()))
	}
	return s.fail(c, err, body)
}

// removePeer serves POST /v1/cluster/peers/:id/remove: the leader removes
// server :id from the Raft configuration (a dead node that cannot ask for
// its own removal). It refuses the leader itself (409 peer_is_leader), an
// unknown node (404 unknown_peer) and a voter whose removal would leave
// no live majority (409 no_live_majority). A follower forwards to the
// leader.
func (s *Server) removePeer(c echo.Context) error {
	pa := s.peerAdmin()
	if pa == nil {
		return s.writeProblem(c, newProblem(CodeNotConfigured, "this node changes no membership"))
	}
	body, p := s.readBody(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	id := c.Param("id")
	if id == "" {
		return s.writeProblem(c, newProblem(CodeBadRequest, "the node ID is empty"))
	}
	if err := pa.RemovePeer(c.Request().Context(), id); err != nil {
		return s.peerFail(c, err, body)
	}
	s.log.Info("httpapi: a server was removed at an operator's request", "id", id)
	return writeJSON(c, http.StatusOK, map[string]string{"status": "removed", "id": id})
}

// transferLeader serves POST /v1/cluster/leader/transfer with an optional
// body {"to": "id"}: the leader hands its leadership to that voter (or to
// any voter) and answers the leader known afterwards. A follower forwards
// to the leader.
func (s *Server) transferLeader(c echo.Context) error {
	pa := s.peerAdmin()
	if pa == nil {
		return s.writeProblem(c, newProblem(CodeNotConfigured, "this node transfers no leadership"))
	}
	body, p := s.readBody(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	var req transferBody
	if len(bytes.TrimSpace(body)) > 0 {
		if p := decodeBody(body, &req); p != nil {
			return s.writeProblem(c, p)
		}
	}
	leader, err := pa.TransferLeadership(c.Request().Context(), req.To)
	if err != nil {
		return s.peerFail(c, err, body)
	}
	s.log.Info("httpapi: leadership transferred at an operator's request", "to", req.To, "leader", leader)
	return writeJSON(c, http.StatusOK, map[string]string{"status": "transferred", "leader_id": leader})
}
