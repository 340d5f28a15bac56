package lane

// settledMemo remembers the most recently settled instructions (§2.4: the
// most recent 512) and their devices: a late result that hits it is acked
// and changes nothing; a late chunk is ignored.
type settledMemo struct {
	ring  []string
	next  int
	index map[string]string // instructionId → deviceId
}

func newSettledMemo(size int) *settledMemo {
	return &settledMemo{ring: make([]string, size), index: make(map[string]string, size)}
}

func (m *settledMemo) add(instructionID, deviceID string) {
	if _, ok := m.index[instructionID]; ok {
		return
	}
	if old := m.ring[m.next]; old != "" {
		delete(m.index, old)
	}
	m.ring[m.next] = instructionID
	m.index[instructionID] = deviceID
	m.next = (m.next + 1) % len(m.ring)
}

// device returns the device of a remembered instruction.
func (m *settledMemo) device(instructionID string) (string, bool) {
	d, ok := m.index[instructionID]
	return d, ok
}
