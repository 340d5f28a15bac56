package approve

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.bug.st/serial"
)

// defaultBaud is the serial speed unless serial:DEV@BAUD says otherwise.
const defaultBaud = 115200

// serialAddr splits DEV[@BAUD].
func serialAddr(addr string) (dev string, baud int, err error) {
	dev, b, ok := strings.Cut(addr, "@")
	if !ok {
		return dev, defaultBaud, nil
	}
	baud, err = strconv.Atoi(b)
	if err != nil || baud <= 0 {
		return "", 0, fmt.Errorf("baud rate %q is not a positive integer", b)
	}
	return dev, baud, nil
}

// dialSerial opens a serial port, 8N1, raw: the device writes its Device
// Info line first, then LF-framed messages, as on a unix socket.
func dialSerial(t Target) (io.ReadWriteCloser, error) {
	dev, baud, err := serialAddr(t.Addr)
	if err != nil {
		return nil, fmt.Errorf("approval device %s: %v", t, err)
	}
	port, err := serial.Open(dev, &serial.Mode{BaudRate: baud, DataBits: 8, Parity: serial.NoParity, StopBits: serial.OneStopBit})
	if err != nil {
		return nil, fmt.Errorf("approval device %s: %w", t, err)
	}
	return port, nil
}
