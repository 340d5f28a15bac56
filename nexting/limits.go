package nexting

// Wire major 1 constants and bounds (short spec §1–6, profiles sheet).
const (
	// WireVersion is the only wire major this package speaks ("v":1).
	WireVersion = 1

	// MaxFrameBytes is the default and the ceiling of a frame, its LF
	// included. Official implementations cap at 4096 even when Device Info
	// advertises more.
	MaxFrameBytes = 4096
	// MinFrameBytes is the smallest frame limit a conforming endpoint
	// supports, and the smallest max_message_bytes Device Info may declare.
	MinFrameBytes = 512

	// MaxIDBytes bounds request ids: 1–64 of [A-Za-z0-9._:-].
	MaxIDBytes = 64
	// MaxSummaryBytes bounds present.sum (and Device Info's
	// max_summary_bytes).
	MaxSummaryBytes = 240
	// MaxTTLMillis bounds present.ttl and nav_present.ttl (1–300000 ms).
	MaxTTLMillis = 300000

	// MaxNesting is how many object/array levels a value may nest below the
	// top-level object (unknown fields, Device Info). The top-level object
	// itself is level 0, so at most 1+MaxNesting containers are open at once.
	MaxNesting = 8

	// MaxDeviceInfoBytes bounds the whole Device Info value.
	MaxDeviceInfoBytes = 4096
)

// Message-field bounds, named once and shared by decoder and encoder.
const (
	maxStatusAgents  = 8
	maxStatusSlot    = 7
	maxLabelBytes    = 64 // status and voice labels, nav items, text title, usage model
	minNavItems      = 2
	maxNavItems      = 8
	maxNavIndex      = 7
	maxKeys          = 64
	maxKeySlot       = 63
	maxShortLabel    = 32 // key and rotary labels
	maxRotaryCtrls   = 16
	maxRotarySlot    = 15
	maxRotaryAbs     = 1000000
	maxDelta         = 127
	maxTextChannel   = 7
	maxContentBytes  = 1024
	maxSafeInteger   = 1<<53 - 1 // usage counters, vendor integers
	maxConfigEntries = 32
	maxConfigKey     = 48
	maxConfigAbs     = 1000000
	maxConfigString  = 128
)
