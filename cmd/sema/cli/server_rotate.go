package cli

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/cluster"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// newRotateClusterSecretCmd is `sema server rotate-cluster-secret`: a new
// cluster secret in the registry, which the running replicas move to in
// phases without refusing a hop between them (lane/cluster.go).
func newRotateClusterSecretCmd() *cobra.Command {
	var data, pgURL string
	leaseTTL := lane.DefaultConfig().LeaseTTL
	c := &cobra.Command{
		Use:   "rotate-cluster-secret [--data DIR | --postgres URL]",
		Short: "Replace the secret the replicas sign their requests to each other with",
		Long: "rotate-cluster-secret stores a new random cluster secret in the registry. The running replicas\n" +
			"read it at their next renewal round (a third of --lease-ttl) and move to it in phases: first\n" +
			"they accept both while they still sign with the old one, one --lease-ttl later they sign with\n" +
			"the new one, and once another --lease-ttl and the hop's minute have passed the old one is refused.\n" +
			"Run it when the old secret may have been read (docs/operations.md says who can read it).",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if pgURL == "" {
				pgURL = os.Getenv(EnvPostgres)
			}
			dir, err := serverDataDir(data)
			if err != nil {
				return err
			}
			if pgURL == "" {
				// Never a new, empty registry made by mistake.
				if _, err := os.Stat(filepath.Join(dir, sqlite.FileName)); err != nil {
					return fmt.Errorf("no registry in %s (%s): pass the server's --data or --postgres", dir, sqlite.FileName)
				}
			}
			st, _, err := openStore(c.Context(), dir, pgURL)
			if err != nil {
				return err
			}
			defer st.Close()
			err = st.RotateClusterSecret(c.Context(), rand.Text()+rand.Text())
			if errors.Is(err, store.ErrNotFound) {
				return errors.New("this registry has no cluster secret yet: no replica with an advertise URL has started on it, so there is nothing to rotate")
			}
			if err != nil {
				return fmt.Errorf("rotating the cluster secret: %w", err)
			}
			round := leaseTTL / 3 // a replica reads the secrets once a round
			signs, refuses := leaseTTL+round, 2*leaseTTL+cluster.HopWindow+round
			fmt.Fprintf(Stdout, "rotated the cluster secret: the replicas sign with the new one within %v and refuse the old one after %v (with --lease-ttl %v)\n",
				signs.Round(time.Second), refuses.Round(time.Second), leaseTTL)
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&data, "data", "", "the data dir of a SQLite registry (default $"+EnvDataDir+", else the OS config dir + /sema/server)")
	fl.StringVar(&pgURL, "postgres", "", "the PostgreSQL URL of the registry (or $"+EnvPostgres+")")
	fl.DurationVar(&leaseTTL, "lease-ttl", leaseTTL, "the replicas' --lease-ttl, for the times this prints")
	return c
}
