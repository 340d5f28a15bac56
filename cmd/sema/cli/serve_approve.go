package cli

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/approve"
	"github.com/sema-agent/sema/nexting/bleadapter"
)

// approveFlags are serve's approval-device flags (docs/executor.md,
// "Approval").
type approveFlags struct {
	target string
	policy string

	parsed approve.Target
	rules  *approve.Policy
}

func (f *approveFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.target, "approve", "", "hold risky instructions until a person allows them on this approval device: unix:PATH, serial:DEV[@BAUD], or ble:AA:BB:CC:DD:EE:FF (Bluetooth LE, Linux with BlueZ; pair and bond the device with bluetoothctl first)")
	c.Flags().StringVar(&f.policy, "approval-policy", "", "a JSON file saying which instructions need approval (default: every exec, and writes outside the workspace)")
}

// check validates the flags and reads the policy, before serve touches
// anything else.
func (f *approveFlags) check() error {
	if f.target == "" {
		if f.policy != "" {
			return usageError{errors.New("--approval-policy needs --approve")}
		}
		return nil
	}
	t, err := approve.ParseTarget(f.target, bleadapter.Host{})
	if err != nil {
		return usageError{err}
	}
	if err := t.Available(); err != nil {
		return err
	}
	f.parsed, f.rules = t, approve.DefaultPolicy()
	if f.policy != "" {
		if f.rules, err = approve.LoadPolicy(f.policy); err != nil {
			return err
		}
	}
	return nil
}

// start starts the approval gate; nil (and a no-op stop) without
// --approve.
func (f *approveFlags) start(workspaceRoot, tempDir string, log *slog.Logger) (gate executor.Gate, stop func(), err error) {
	if f.target == "" {
		return nil, func() {}, nil
	}
	if len(f.rules.Rules) == 0 {
		log.Warn("the approval policy needs approval for nothing; every instruction runs without asking")
	}
	g, err := approve.New(approve.Config{
		Policy:         f.rules,
		WorkspaceRoot:  workspaceRoot,
		TempDir:        tempDir,
		Device:         f.parsed.String(),
		Open:           f.parsed.Open,
		ConnectTimeout: f.parsed.ConnectTimeout(),
		Logger:         log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("approval device: %w", err)
	}
	return g, func() { _ = g.Close() }, nil
}
