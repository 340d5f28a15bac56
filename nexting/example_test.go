package nexting_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/sema-agent/sema/nexting"
)

// The host side of one connection: Device Info, negotiation, then frames
// arriving in BLE-sized chunks.
func Example() {
	info, err := nexting.ParseDeviceInfo([]byte(`{"protocol":"nexting-device","spec":"0.2.0","wire":[1],` +
		`"profiles":["approval/1","status/1"],"model":"pad","fw":"1","max_message_bytes":1024,` +
		`"max_summary_bytes":120,"statusSlots":2}`))
	if err != nil {
		panic(err)
	}
	neg, err := nexting.Negotiate(nexting.DefaultHostConfig(), info)
	if err != nil {
		panic(err)
	}
	fmt.Println(neg.Profiles(), neg.MaxMessageBytes(), neg.MaxSummaryBytes())

	out, _ := neg.Encode(nexting.Present{ID: "r1", Summary: "Allow git push?", TTLMillis: 30000})
	fmt.Printf("%s", out)

	stream := `{"v":1,"t":"answer","id":"r1","ch":"allow"}` + "\n" +
		`{"v":1,"t":"key_event","slot":3,"event":"press","seq":18,"padding":"xxxxxxxxxx"}` + "\n"
	fr := neg.NewFramer()
	for i := 0; i < len(stream); i += 20 {
		for _, r := range fr.Feed([]byte(stream[i:min(i+20, len(stream))])) {
			if r.Err != nil {
				continue
			}
			msg, err := neg.Decode(r.Frame)
			if err != nil {
				if reply, ok := nexting.Reply(err); ok {
					b, _ := nexting.Encode(reply)
					fmt.Printf("refused (%v), reply %s", nexting.CodeOf(err), b)
				}
				continue
			}
			switch m := msg.(type) {
			case nexting.Answer:
				fmt.Println("answer", m.ID, m.Choice)
			}
		}
	}
	// Output:
	// [approval/1 status/1] 1024 120
	// {"v":1,"t":"present","id":"r1","sum":"Allow git push?","opt":["allow","deny"],"ttl":30000}
	// answer r1 allow
	// refused (unsupported_profile), reply {"v":1,"t":"error","code":"unsupported_profile"}
}

// Decode is safe for concurrent use (its scratch state is pooled).
func TestDecodeConcurrent(t *testing.T) {
	frames := []string{
		`{"v":1,"t":"present","id":"r1","sum":"a","opt":["allow","deny"],"ttl":1}`,
		`{"v":1,"t":"status","agents":[{"slot":0,"state":"idle"},{"slot":1,"state":"working"}]}`,
		`{"v":1,"t":"config","rev":7,"entries":[{"key":"a","value":"x"},{"key":"b","value":1}]}`,
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				f := frames[(g+i)%len(frames)]
				m, err := nexting.Decode([]byte(f))
				if err != nil {
					t.Error(err)
					return
				}
				if b, _ := nexting.Encode(m); string(b) != f+"\n" {
					t.Errorf("got %s want %s", b, f)
					return
				}
			}
		}()
	}
	wg.Wait()
}
