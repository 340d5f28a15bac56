package bench

import (
	"strings"
	"testing"

	"github.com/sema-agent/sema/internal/probe"
)

func TestStagesTakesEachPointsFirstMarkInItsTripAndLeavesOutIncompleteTrips(t *testing.T) {
	const a, b, c = probe.Point("a"), probe.Point("b"), probe.Point("c")
	marks := map[probe.Point][]int64{}
	if err := readMarks(strings.NewReader(strings.Join([]string{
		"a 1000", "b 1010", "b 1015", "c 1040", // trip 1: 10, 30 (b's second mark is not taken)
		"a 2000", "b 2020", // trip 2: no c before trip 3 begins: left out
		"a 3000", "c 3005", "b 3010", "c 3050", // trip 3: c's mark before b's is not b's successor: 10, 40
	}, "\n")), marks); err != nil {
		t.Fatal(err)
	}
	stages, trips := Stages(marks, []probe.Point{a, b, c}, 0)
	if trips != 2 {
		t.Fatalf("%d complete trips, want 2", trips)
	}
	want := []Stage{{From: a, To: b, P50: 10, P90: 10}, {From: b, To: c, P50: 30, P90: 40}}
	for i, s := range stages {
		if s != want[i] {
			t.Errorf("stage %d = %+v, want %+v", i, s, want[i])
		}
	}
	if _, trips := Stages(marks, []probe.Point{a, b, c}, 2); trips != 1 {
		t.Errorf("skipping 2 trips left %d complete, want 1", trips)
	}
}

func TestReadMarksNamesTheBadLine(t *testing.T) {
	err := readMarks(strings.NewReader("a 1\nb x\n"), map[probe.Point][]int64{})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err %v, want one naming line 2", err)
	}
}
