// Package deptest holds the module's import rules as a test: each rule
// names packages and what they must not depend on, directly or not, and a
// violation fails naming the chain of imports that breaks it.
package deptest

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sema-agent/sema"

// rule: the packages From (a path, or a prefix ending in "/...") import
// nothing that Forbidden matches, directly or through other packages.
type rule struct {
	why       string
	from      []string
	forbidden []string
	except    []string // packages of From the rule does not hold for yet
}

var rules = []rule{
	{
		why:  "the lane's core links no HTTP API, MCP face, client SDK or CLI of its own",
		from: []string{module + "/lane"},
		forbidden: []string{
			module + "/lane/httpapi", module + "/mcp", module + "/client", module + "/internal/inproc",
			"github.com/modelcontextprotocol/go-sdk/...", "github.com/spf13/cobra",
		},
	},
	{
		why:       "the audit writer is the core's sink and knows nothing of the core or its doors",
		from:      []string{module + "/lane/audit"},
		forbidden: []string{module + "/lane", module + "/lane/httpapi"},
	},
	{
		why:       "the wire contract and the API's shapes do no I/O over HTTP",
		from:      []string{module + "/protocol/...", module + "/api/..."},
		forbidden: []string{"net/http"},
	},
	{
		why:       "the device side knows nothing of the lane's server",
		from:      []string{module + "/executor/...", module + "/device/..."},
		forbidden: []string{module + "/lane/..."},
	},
	{
		why:       "library packages do not pull in BLE or D-Bus: cmd/ wires the BLE transport in",
		from:      []string{module + "/executor/...", module + "/device/...", module + "/lane/...", module + "/nexting/...", module + "/client/...", module + "/mcp/..."},
		forbidden: []string{"tinygo.org/x/bluetooth/...", "github.com/godbus/dbus/..."},
		except:    []string{module + "/nexting/bleadapter"}, // the BLE transport itself
	},
}

// pkg is what go list tells of one package.
type pkg struct {
	ImportPath string
	Imports    []string
}

func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	graph := listModule(t)
	for _, r := range rules {
		for path := range graph {
			if !matchesAny(path, r.from) || matchesAny(path, r.except) || strings.HasSuffix(path, ".test") {
				continue
			}
			if chain := forbiddenChain(graph, path, r.forbidden); chain != nil {
				t.Errorf("%s imports %s (%s): %s", path, chain[len(chain)-1], r.why, strings.Join(chain, " → "))
			}
		}
	}
}

// listModule returns every package of the module and of its dependencies,
// each with its imports (non-test).
func listModule(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", module+"/...")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errOut.String())
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(&out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		graph[p.ImportPath] = p.Imports
	}
	return graph
}

// forbiddenChain is the shortest chain of imports from root to a package
// that forbidden matches, nil when there is none.
func forbiddenChain(graph map[string][]string, root string, forbidden []string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range graph[p] {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = p
			if matchesAny(imp, forbidden) {
				var chain []string
				for q := imp; q != ""; q = prev[q] {
					chain = append([]string{q}, chain...)
				}
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

// matchesAny reports whether path is one of patterns: a path, or a prefix
// ending in "/..." that matches the path itself and every path below it.
func matchesAny(path string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "/..."); ok {
			if path == prefix || strings.HasPrefix(path, prefix+"/") {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}
