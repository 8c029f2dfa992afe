package node

import (
	"fmt"

	"github.com/intentledger/intentd/ledger"
)

// loadQuotas reads Config.NamespaceQuotasFile (nil, nil without one).
func (c Config) loadQuotas() (ledger.NamespaceQuotas, error) {
	if c.NamespaceQuotasFile == "" {
		return nil, nil
	}
	q, err := ledger.LoadNamespaceQuotas(c.NamespaceQuotasFile)
	if err != nil {
		return nil, fmt.Errorf("--namespace-quotas: %w", err)
	}
	return q, nil
}

// reloadQuotas reads the namespace quotas file again and puts it in
// force; a file that does not load changes nothing.
func (n *Node) reloadQuotas() {
	if n.cfg.NamespaceQuotasFile == "" || n.svc == nil {
		return
	}
	q, err := n.cfg.loadQuotas()
	if err == nil {
		err = n.svc.SetNamespaceQuotas(q)
	}
	if err != nil {
		n.log.Error("NAMESPACE QUOTAS NOT RELOADED: keeping the quotas in force", "err", err)
		return
	}
	n.log.Info("namespace quotas reloaded", "namespaces", len(q))
}
