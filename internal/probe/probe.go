// Package probe marks the moments an instruction passes on its way through
// the lane and the executor, so that bench/stages can say where an exec
// round trip's time goes. It costs nothing in a normal
// build: Mark is then an empty function, which the compiler removes. Built
// with -tags semaprobe, each process appends "point unix-nanoseconds" lines
// to a file of its own in $SEMA_PROBE_DIR.
//
// A mark carries a point's name and a time, never content.
package probe

// Point names one moment of an exec round trip, in the order it is passed.
type Point string

const (
	ClientSend        Point = "client.send"        // the caller sends the request
	LaneRequest       Point = "lane.request"       // the lane's handler chain begins
	LaneAuthenticated Point = "lane.authenticated" // routed and authenticated: the instruction handler begins
	LaneParsed        Point = "lane.parsed"        // the body is read and parsed
	LaneDispatched    Point = "lane.dispatched"    // the call is queued for the device
	LaneFrameWrite    Point = "lane.frame.write"   // a frame's write to a device's socket begins
	ExecReceived      Point = "exec.received"      // the executor has decoded the instruction
	ExecStarted       Point = "exec.started"       // the op's goroutine begins the exec
	ExecSpawned       Point = "exec.spawned"       // the shell is started
	ExecExited        Point = "exec.exited"        // the shell has exited
	ExecExitChunk     Point = "exec.exit.chunk"    // the exit chunk is about to be queued
	ExecResultWrite   Point = "exec.result.write"  // the result frame's write to the socket begins
	LaneResultRead    Point = "lane.result.read"   // the lane has decoded the result
	LaneAnswered      Point = "lane.answered"      // the outcome line is handed to net/http
	ClientDone        Point = "client.done"        // the caller has read the whole answer
)

// Trip is every point of an exec round trip, in order.
var Trip = []Point{
	ClientSend, LaneRequest, LaneAuthenticated, LaneParsed, LaneDispatched, LaneFrameWrite,
	ExecReceived, ExecStarted, ExecSpawned, ExecExited, ExecExitChunk, ExecResultWrite,
	LaneResultRead, LaneAnswered, ClientDone,
}

// DirEnv names the directory the marks are written to.
const DirEnv = "SEMA_PROBE_DIR"
