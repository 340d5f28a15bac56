package lane_test

import (
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/httpapi"
)

// The lane's tests drive the core through its HTTP API, which imports the
// core: only an external test package may import it.
func init() { lane.NewDoors = func(s *lane.Server) lane.Doors { return httpapi.New(s) } }
