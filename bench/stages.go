package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sema-agent/sema/internal/probe"
)

// Stage is one step of a round trip: from one probe point to the next, the
// median and the 90th percentile over the trips that passed every point.
type Stage struct {
	From, To probe.Point
	P50, P90 time.Duration
}

// ProbeExecTrue sends trips round trips of `exec true` to u's device with
// a keep-alive HTTP client, marking probe.ClientSend and probe.ClientDone
// around each (the caller's process must be built with -tags semaprobe).
func ProbeExecTrue(ctx context.Context, u *UserPath, trips int) error {
	hc := &http.Client{}
	const body = `{"kind":"exec","args":{"command":"true"},"timeoutMs":10000}`
	for i := 0; i < trips; i++ {
		probe.Mark(probe.ClientSend)
		_, err := instructStats(ctx, hc, u, body)
		probe.Mark(probe.ClientDone)
		if err != nil {
			return fmt.Errorf("trip %d: %w", i+1, err)
		}
	}
	return nil
}

// ReadMarks reads every *.marks file in dir (one per process).
func ReadMarks(dir string) (map[probe.Point][]int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.marks"))
	if err != nil {
		return nil, err
	}
	marks := map[probe.Point][]int64{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		err = readMarks(f, marks)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return marks, nil
}

func readMarks(r io.Reader, into map[probe.Point][]int64) error {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		name, at, ok := strings.Cut(sc.Text(), " ")
		t, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil {
			return fmt.Errorf("line %d: want \"point unix-nanoseconds\", got %q", n, sc.Text())
		}
		into[probe.Point(name)] = append(into[probe.Point(name)], t)
	}
	return sc.Err()
}

// Stages splits the trips marked in marks into the steps between
// consecutive points. A trip is the time from one mark of points[0] to the
// next; in it each point is taken at its first mark at or after the
// previous point's, and a trip that misses a point is left out. skip
// leaves out the first trips (the warm-up).
func Stages(marks map[probe.Point][]int64, points []probe.Point, skip int) ([]Stage, int) {
	if len(points) < 2 {
		return nil, 0
	}
	for _, ts := range marks {
		slices.Sort(ts)
	}
	starts := marks[points[0]]
	deltas := make([][]time.Duration, len(points)-1)
	trips := 0
	for i := skip; i < len(starts); i++ {
		end := int64(1<<63 - 1)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		at := make([]int64, len(points))
		at[0] = starts[i]
		complete := true
		for k := 1; k < len(points) && complete; k++ {
			ts := marks[points[k]]
			j, _ := slices.BinarySearch(ts, at[k-1])
			complete = j < len(ts) && ts[j] < end
			if complete {
				at[k] = ts[j]
			}
		}
		if !complete {
			continue
		}
		trips++
		for k := range deltas {
			deltas[k] = append(deltas[k], time.Duration(at[k+1]-at[k]))
		}
	}
	if trips == 0 {
		return nil, 0
	}
	out := make([]Stage, len(deltas))
	for k, ds := range deltas {
		out[k] = Stage{From: points[k], To: points[k+1], P50: Quantile(ds, 0.5), P90: Quantile(ds, 0.9)}
	}
	return out, trips
}
