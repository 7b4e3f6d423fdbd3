package pgproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ndigo/ndigo/internal/serverproc"
)

// bouncerHint completes the error when pgbouncer is missing.
const bouncerHint = "install PgBouncer (Debian: apt-get install pgbouncer; make test does it)"

// A Bouncer is a private PgBouncer in transaction pooling mode in front of
// a Server: each transaction may run on a different server session, as in
// production deployments that pool connections this way.
type Bouncer struct {
	cmd  *exec.Cmd
	dir  string
	port int
}

// StartBouncer starts PgBouncer on a free loopback port in front of s, in
// transaction pooling mode with two server connections for the database
// postgres, and waits until it answers. Run as root, it runs as the
// postgres user, as s does (PgBouncer refuses root).
func (s *Server) StartBouncer() (*Bouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			return nil, fmt.Errorf("pgproc: pgbouncer not found in PATH nor in /usr/sbin: %s", bouncerHint)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	b := &Bouncer{dir: filepath.Join(s.dir, "pgbouncer")}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgproc: %w", err)
	}
	if s.cred != nil {
		_ = os.Chown(b.dir, int(s.cred.Uid), int(s.cred.Gid))
	}
	var lastErr error
	for range 10 {
		if b.port, lastErr = serverproc.FreePort(); lastErr != nil {
			continue
		}
		ini := fmt.Sprintf(`[databases]
postgres = host=127.0.0.1 port=%d dbname=postgres user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 2
max_client_conn = 200
logfile = %s
`, s.port, b.port, filepath.Join(b.dir, "users.txt"), b.logPath())
		for name, text := range map[string]string{"pgbouncer.ini": ini, "users.txt": `"postgres" ""` + "\n"} {
			if err := os.WriteFile(filepath.Join(b.dir, name), []byte(text), 0o644); err != nil {
				return nil, fmt.Errorf("pgproc: %w", err)
			}
		}
		cmd := s.command(bin, filepath.Join(b.dir, "pgbouncer.ini"))
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("pgproc: starting pgbouncer: %w", err)
		}
		if lastErr = serverproc.WaitReady(cmd, StartTimeout, 10*time.Millisecond, b.ping); lastErr == nil {
			b.cmd = cmd
			return b, nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	return nil, fmt.Errorf("pgproc: pgbouncer did not answer: %w; log:\n%s", lastErr, serverproc.Tail(b.logPath(), 3000))
}

func (b *Bouncer) logPath() string { return filepath.Join(b.dir, "pgbouncer.log") }

func (b *Bouncer) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, b.URL())
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
	return err
}

// URL returns a connection URL through the bouncer for the superuser
// postgres on database postgres, without TLS.
func (b *Bouncer) URL() string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(b.port) + "/postgres?sslmode=disable"
}

// Stop kills the bouncer and waits for it to exit. It may be called more
// than once.
func (b *Bouncer) Stop() {
	if b.cmd != nil {
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
		_ = b.cmd.Wait()
		b.cmd = nil
	}
}
