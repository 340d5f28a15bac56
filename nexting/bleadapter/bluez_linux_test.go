package bleadapter

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"tinygo.org/x/bluetooth"

	"github.com/sema-agent/sema/nexting"
)

// dialNoBus dials with the system D-Bus pointed at a socket that does not
// exist, so the test never touches a real BlueZ.
func dialNoBus(t *testing.T) error {
	t.Helper()
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+t.TempDir()+"/no-system-bus")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	l, err := Dial(ctx, "aa:bb:cc:dd:ee:ff")
	if l != nil {
		l.Disconnect()
		t.Fatal("connected without a system bus")
	}
	return err
}

// Without a system D-Bus, Dial fails with an error that says so (and
// gives the cause), and frees its slot: a second Dial gets the same
// answer rather than waiting.
func TestDialWithoutSystemBus(t *testing.T) {
	for range 2 {
		err := dialNoBus(t)
		if !errors.Is(err, ErrNoAdapter) ||
			!strings.HasPrefix(err.Error(), "no Bluetooth adapter: the system D-Bus is not reachable") ||
			!strings.Contains(err.Error(), "no-system-bus") {
			t.Fatalf("Dial: %v", err)
		}
	}
}

// The same on this machine as it is, when it has no system bus at its
// default address (as the machine these tests were written on).
func TestDialOnAMachineWithoutBluetooth(t *testing.T) {
	if os.Getenv("DBUS_SYSTEM_BUS_ADDRESS") != "" {
		t.Skip("DBUS_SYSTEM_BUS_ADDRESS is set")
	}
	if _, err := os.Stat("/var/run/dbus/system_bus_socket"); err == nil {
		t.Skip("this machine has a system D-Bus; not dialing a real BlueZ from a test")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := Dial(ctx, "AA:BB:CC:DD:EE:FF")
	if !errors.Is(err, ErrNoAdapter) || !strings.Contains(err.Error(), "system_bus_socket") {
		t.Fatalf("Dial: %v", err)
	}
}

func TestDialRefusesABadAddress(t *testing.T) {
	if _, err := Dial(t.Context(), "AA:BB:CC"); err == nil || !strings.Contains(err.Error(), "six two-digit hex bytes") {
		t.Fatalf("Dial: %v", err)
	}
}

// tinygo parses the published UUIDs to themselves.
func TestGATTUUIDs(t *testing.T) {
	for _, s := range []string{nexting.BLEServiceUUID, nexting.BLEDownlinkUUID, nexting.BLEUplinkUUID, nexting.BLEDeviceInfoUUID} {
		u, err := bluetooth.ParseUUID(s)
		if err != nil || u.String() != s {
			t.Errorf("%s: %v %v", s, u, err)
		}
	}
}

// Which signals move the link: only BlueZ's (by unique name) for the
// device and the uplink, and the bus's own for BlueZ leaving it. A local
// process forging a notification or a disconnect is ignored.
func TestSignalFilter(t *testing.T) {
	const dev = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"
	const up = dev + "/service000a/char000d"
	f := signalFilter{owner: ":1.5", dev: dev, uplink: up}
	props := func(sender string, path dbus.ObjectPath, iface string, changes map[string]any) *dbus.Signal {
		m := map[string]dbus.Variant{}
		for k, v := range changes {
			m[k] = dbus.MakeVariant(v)
		}
		return &dbus.Signal{Sender: sender, Path: path, Name: sigPropertiesChanged, Body: []any{iface, m, []string{}}}
	}
	frame := []byte(`{"v":1,"t":"answer","id":"r1","ch":"allow"}` + "\n")
	for _, c := range []struct {
		name  string
		sig   *dbus.Signal
		value string
		down  bool
	}{
		{"notification", props(":1.5", up, ifaceGattCh, map[string]any{"Value": frame}), string(frame), false},
		{"forged notification", props(":1.99", up, ifaceGattCh, map[string]any{"Value": frame}), "", false},
		{"notification on another characteristic", props(":1.5", dev+"/service000a/char000b", ifaceGattCh, map[string]any{"Value": frame}), "", false},
		{"empty notification", props(":1.5", up, ifaceGattCh, map[string]any{"Value": []byte{}}), "", false},
		{"notifications stopped", props(":1.5", up, ifaceGattCh, map[string]any{"Notifying": false}), "", true},
		{"notifications started", props(":1.5", up, ifaceGattCh, map[string]any{"Notifying": true}), "", false},
		{"disconnected", props(":1.5", dev, ifaceDevice, map[string]any{"Connected": false}), "", true},
		{"forged disconnect", props(":1.99", dev, ifaceDevice, map[string]any{"Connected": false}), "", false},
		{"another device disconnected", props(":1.5", "/org/bluez/hci0/dev_11_22_33_44_55_66", ifaceDevice, map[string]any{"Connected": false}), "", false},
		{"unpaired", props(":1.5", dev, ifaceDevice, map[string]any{"Paired": false}), "", true},
		{"bond removed", props(":1.5", dev, ifaceDevice, map[string]any{"Bonded": false}), "", true},
		{"RSSI", props(":1.5", dev, ifaceDevice, map[string]any{"RSSI": int16(-60)}), "", false},
		{"connected", props(":1.5", dev, ifaceDevice, map[string]any{"Connected": true}), "", false},
		{"malformed", &dbus.Signal{Sender: ":1.5", Path: dev, Name: sigPropertiesChanged, Body: []any{ifaceDevice}}, "", false},
		{"device removed", &dbus.Signal{Sender: ":1.5", Path: "/", Name: sigInterfacesRemoved, Body: []any{dbus.ObjectPath(dev), []string{ifaceDevice}}}, "", true},
		{"adapter removed", &dbus.Signal{Sender: ":1.5", Path: "/", Name: sigInterfacesRemoved, Body: []any{dbus.ObjectPath("/org/bluez/hci0"), []string{"org.bluez.Adapter1"}}}, "", true},
		{"service removed", &dbus.Signal{Sender: ":1.5", Path: "/", Name: sigInterfacesRemoved, Body: []any{dbus.ObjectPath(dev + "/service000a"), []string{ifaceGattSv}}}, "", true},
		{"other device removed", &dbus.Signal{Sender: ":1.5", Path: "/", Name: sigInterfacesRemoved, Body: []any{dbus.ObjectPath(dev + "0"), []string{ifaceDevice}}}, "", false},
		{"forged removal", &dbus.Signal{Sender: ":1.99", Path: "/", Name: sigInterfacesRemoved, Body: []any{dbus.ObjectPath(dev), []string{ifaceDevice}}}, "", false},
		{"BlueZ left", &dbus.Signal{Sender: busName, Path: "/org/freedesktop/DBus", Name: sigNameOwnerChanged, Body: []any{bluezName, ":1.5", ""}}, "", true},
		{"BlueZ replaced", &dbus.Signal{Sender: busName, Path: "/org/freedesktop/DBus", Name: sigNameOwnerChanged, Body: []any{bluezName, ":1.5", ":1.7"}}, "", true},
		{"forged owner change", &dbus.Signal{Sender: ":1.99", Path: "/org/freedesktop/DBus", Name: sigNameOwnerChanged, Body: []any{bluezName, ":1.5", ""}}, "", false},
		{"another name left", &dbus.Signal{Sender: busName, Path: "/org/freedesktop/DBus", Name: sigNameOwnerChanged, Body: []any{"org.example", ":1.8", ""}}, "", false},
	} {
		value, down := f.classify(c.sig)
		if string(value) != c.value || down != c.down {
			t.Errorf("%s: value %q down %v; want %q %v", c.name, value, down, c.value, c.down)
		}
	}
}
