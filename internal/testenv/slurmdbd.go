package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Slurm's accounting for a SlurmCluster (SlurmClusterOptions.Accounting):
// slurmdbd on the controller node, storing into a MariaDB of its own. The
// database's files live in the controller's directory; test/slurm/node-init.sh
// starts mariadbd (on the controller's loopback only: its network namespace
// is private, so the standard port is free) and slurmdbd, and adds the
// cluster and the test's accounts (DIR/accounts) to the database, all
// before slurmctld, which needs the database at its first start. They die
// with the controller's PID namespace.

// clusterDBPort is MariaDB's port inside the controller's network namespace.
const clusterDBPort = 3306

// accountingStorage is the cluster's AccountingStorageType.
func (c *SlurmCluster) accountingStorage() string {
	if c.opts.Accounting {
		return "accounting_storage/slurmdbd"
	}
	return "accounting_storage/none"
}

// dbDir is the database's data directory (on the host's file system).
func (c *SlurmCluster) dbDir() string { return filepath.Join(c.Controller.Dir, "db") }

// initDatabase creates an empty MariaDB data directory whose root may
// log in over TCP without a password (nothing but the controller's own
// loopback reaches it). It takes well under a second.
func (c *SlurmCluster) initDatabase(t *testing.T) {
	t.Helper()
	out, err := exec.Command("mariadb-install-db", "--no-defaults", "--auth-root-authentication-method=normal",
		"--datadir="+c.dbDir(), "--user=root", "--skip-test-db",
		"--innodb-log-file-size=4M", "--innodb-buffer-pool-size=8M").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
}

// writeDbdConf writes slurmdbd.conf beside slurm.conf, where slurmdbd
// looks for it (SLURM_CONF's directory); slurmdbd refuses one that others
// can read.
func (c *SlurmCluster) writeDbdConf(t *testing.T) {
	t.Helper()
	conf := fmt.Sprintf(`AuthType=auth/munge
AuthInfo=socket=%[1]s/node/munge/munge.sock
DbdHost=%[2]s
DbdAddr=%[3]s
DbdPort=%[4]d
SlurmUser=root
LogFile=%[1]s/node/slurmdbd.log
PidFile=%[1]s/node/slurmdbd.pid
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=%[5]d
StorageUser=root
StorageLoc=slurm_acct_db
`, c.Dir, c.Controller.Name, c.Controller.Addr, clusterDbdPort, clusterDBPort)
	must(t, os.WriteFile(filepath.Join(c.Dir, "slurmdbd.conf"), []byte(conf), 0o600))
	must(t, os.WriteFile(filepath.Join(c.Dir, "accounts"), []byte(strings.Join(c.opts.Accounts, ",")), 0o644))
}
