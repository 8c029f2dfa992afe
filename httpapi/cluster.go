package httpapi

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/clusterview"
)

// ClusterInfo reports the cluster as this node sees it, for GET
// /v1/cluster and /readyz, as clusterview's plain data; cluster.Node
// implements it (node asserts it at compile time).
type ClusterInfo interface {
	Status() clusterview.Status
}

// clusterStatus serves GET /v1/cluster: this node's view, never forwarded.
func (s *Server) clusterStatus(c echo.Context) error {
	if s.cluster == nil {
		return s.writeProblem(c, newProblem(CodeUnavailable, "this node has no cluster status"))
	}
	return writeJSON(c, http.StatusOK, s.cluster.Status())
}

// healthz serves GET /healthz: the process is serving.
func (s *Server) healthz(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz serves GET /readyz: the node has a leader and is caught up.
func (s *Server) readyz(c echo.Context) error {
	if s.cluster == nil {
		return s.writeProblem(c, newProblem(CodeNotReady, "this node has no cluster status"))
	}
	st := s.cluster.Status()
	if !st.Ready {
		return s.writeProblem(c, newProblem(CodeNotReady, fmt.Sprintf(
			"node %q is %s; leader %q; applied index %d of commit index %d; %s",
			st.NodeID, st.State, st.LeaderID, st.AppliedIndex, st.CommitIndex, st.NotReady)))
	}
	return writeJSON(c, http.StatusOK, map[string]string{"status": "ready", "node_id": st.NodeID, "leader_id": st.LeaderID})
}
