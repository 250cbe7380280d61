package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Identity is a user the local API server authenticates by a static bearer token of its
// own (--token-auth-file), so that a component runs under the RBAC and admission
// policies a real install gives it rather than as the admin, whom no policy about it
// could be tested against. The API server reads its tokens once, at start: every
// identity is known to the cluster from then on (Identities), and a Manager runs as one
// by naming it (Manager.Identity).
type Identity struct {
	// Name names its kubeconfig: <state>/kubeconfig-<Name>.
	Name string
	// User and Groups are what the API server authenticates the token as.
	User   string
	Groups []string
}

// ServiceAccountIdentity is the identity of ServiceAccount namespace/name as the API
// server authenticates its tokens: user system:serviceaccount:<namespace>:<name>, in the
// groups of every ServiceAccount, of its namespace's, and of authenticated users.
func ServiceAccountIdentity(name, namespace, serviceAccount string) Identity {
	return Identity{
		Name:   name,
		User:   "system:serviceaccount:" + namespace + ":" + serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// The batchledger manager's ServiceAccount as config/default (and the chart as release
// batchledger in this namespace) creates it: the name config/policy's pod-release-only
// and ledger-manager-only policies exempt or restrict by.
const (
	BatchledgerNamespace      = "batchledger-system"
	BatchledgerServiceAccount = "batchledger-controller-manager"
)

// BatchledgerIdentity is the batchledger manager's identity on the local cluster.
var BatchledgerIdentity = ServiceAccountIdentity(BatchledgerName, BatchledgerNamespace, BatchledgerServiceAccount)

// BatchledgerWorkerServiceAccount is the ServiceAccount of batchledger in the worker role
// of a MultiKueue worker cluster, as config/worker names it.
const BatchledgerWorkerServiceAccount = "batchledger-worker"

// BatchledgerWorkerIdentity is batchledger's identity in the worker role.
var BatchledgerWorkerIdentity = ServiceAccountIdentity(BatchledgerWorkerName, BatchledgerNamespace, BatchledgerWorkerServiceAccount)

// Identities are the identities every local cluster authenticates besides the admin.
var Identities = []Identity{BatchledgerIdentity, BatchledgerWorkerIdentity}

// writeTokens writes the API server's token file: the admin's token (group
// system:masters) and one random token for each of Identities, and remembers each
// identity's token.
func (c *Cluster) writeTokens(path, adminToken string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s,admin,admin-uid,system:masters\n", adminToken)
	c.tokens = map[string]string{}
	for _, id := range Identities {
		token := randomToken()
		c.tokens[id.Name] = token
		fmt.Fprintf(&b, "%s,%s,%s-uid,%q\n", token, id.User, id.Name, strings.Join(id.Groups, ","))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// writeIdentityKubeconfigs writes the kubeconfig of each of Identities.
func (c *Cluster) writeIdentityKubeconfigs(apiPort int) error {
	for _, id := range Identities {
		if _, err := writeKubeconfigFile(c.identityKubeconfig(id.Name), apiPort, c.CA.CertPEM, c.tokens[id.Name]); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) identityKubeconfig(name string) string {
	return filepath.Join(c.StateDir, "kubeconfig-"+name)
}

// KubeconfigFor returns the kubeconfig of an identity (by its Name), or the admin's for
// nil.
func (c *Cluster) KubeconfigFor(id *Identity) (string, error) {
	if id == nil {
		return c.Kubeconfig, nil
	}
	if _, ok := c.tokens[id.Name]; !ok {
		return "", fmt.Errorf("identity %q is not among localcluster.Identities, whose tokens the API server was started with", id.Name)
	}
	return c.identityKubeconfig(id.Name), nil
}
