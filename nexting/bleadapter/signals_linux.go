package bleadapter

import (
	"strings"

	"github.com/godbus/dbus/v5"
)

// D-Bus names this adapter uses besides tinygo's calls.
const (
	bluezName   = "org.bluez"
	busName     = "org.freedesktop.DBus"
	ifaceDevice = "org.bluez.Device1"
	ifaceGattCh = "org.bluez.GattCharacteristic1"
	ifaceGattSv = "org.bluez.GattService1"
	ifaceProps  = "org.freedesktop.DBus.Properties"
	ifaceObjMgr = "org.freedesktop.DBus.ObjectManager"

	sigPropertiesChanged = ifaceProps + ".PropertiesChanged"
	sigInterfacesRemoved = ifaceObjMgr + ".InterfacesRemoved"
	sigNameOwnerChanged  = busName + ".NameOwnerChanged"
	memberPropsChanged   = "PropertiesChanged"
)

// signalFilter reads the D-Bus signals of one link. The system bus lets
// any local process emit a signal with any object path and interface, and
// a connection receives every signal matching any of its match rules, so
// only signals whose sender is the unique name that owned org.bluez when
// the link was set up count (only the bus itself for NameOwnerChanged).
// tinygo.org/x/bluetooth v0.16.0's EnableNotifications does not check the
// sender, which would let a local process forge uplink frames (an answer
// "allow"); that is why this package subscribes to the uplink itself.
type signalFilter struct {
	owner  string          // BlueZ's unique bus name, ":1.5"
	dev    dbus.ObjectPath // the device
	uplink dbus.ObjectPath // the uplink characteristic
}

// rules are the match rules that route this link's signals to the
// connection (the filter checks them again: other rules on the shared
// connection route other signals too).
func (f signalFilter) rules() [][]dbus.MatchOption {
	return [][]dbus.MatchOption{
		{dbus.WithMatchSender(bluezName), dbus.WithMatchPathNamespace(f.dev),
			dbus.WithMatchInterface(ifaceProps), dbus.WithMatchMember(memberPropsChanged)},
		{dbus.WithMatchSender(bluezName), dbus.WithMatchInterface(ifaceObjMgr), dbus.WithMatchMember("InterfacesRemoved")},
		{dbus.WithMatchSender(busName), dbus.WithMatchInterface(busName), dbus.WithMatchMember("NameOwnerChanged"),
			dbus.WithMatchArg(0, bluezName)},
	}
}

// classify returns the uplink notification sig carries (nil if none) and
// whether it says the link is down or unusable: the device disconnected,
// unpaired or lost its bond; notifications stopped; the device, its
// service or the adapter was removed; BlueZ left the bus.
func (f signalFilter) classify(sig *dbus.Signal) (value []byte, down bool) {
	switch sig.Name {
	case sigNameOwnerChanged:
		if sig.Sender != busName || len(sig.Body) != 3 {
			return nil, false
		}
		name, _ := sig.Body[0].(string)
		owner, _ := sig.Body[2].(string)
		return nil, name == bluezName && owner != f.owner
	case sigInterfacesRemoved:
		if sig.Sender != f.owner || len(sig.Body) < 1 {
			return nil, false
		}
		path, _ := sig.Body[0].(dbus.ObjectPath)
		return nil, within(f.dev, path) || within(f.uplink, path)
	case sigPropertiesChanged:
		if sig.Sender != f.owner || len(sig.Body) < 2 {
			return nil, false
		}
		iface, _ := sig.Body[0].(string)
		changes, _ := sig.Body[1].(map[string]dbus.Variant)
		switch {
		case sig.Path == f.dev && iface == ifaceDevice:
			for _, k := range []string{"Connected", "Paired", "Bonded"} {
				if v, ok := changes[k].Value().(bool); ok && !v {
					return nil, true
				}
			}
		case sig.Path == f.uplink && iface == ifaceGattCh:
			if v, ok := changes["Value"].Value().([]byte); ok && len(v) > 0 {
				value = v
			}
			if n, ok := changes["Notifying"].Value().(bool); ok && !n {
				down = true
			}
			return value, down
		}
	}
	return nil, false
}

// within reports whether path is removed, or one of its ancestors.
func within(path, removed dbus.ObjectPath) bool {
	return path == removed || strings.HasPrefix(string(path), string(removed)+"/")
}
