package client

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/internal/safetext"
)

// NotUTF8Error is an instruction whose path, command or other text is not
// valid UTF-8 (a file name the OS allows, a byte typed on the command
// line). JSON carries Unicode text only, and encoding/json would send
// U+FFFD for each such byte: the device would act on another path or
// command. So the instruction is refused before anything is sent.
type NotUTF8Error struct {
	Field string // the field's JSON name: path, command, cwd, shellEnv …
	Value string
}

func (e *NotUTF8Error) Error() string {
	// The bad bytes spelled \xHH, as the shell's $'…' takes them.
	return fmt.Sprintf("the %s \"%s\" is not valid UTF-8, which the lane cannot carry (nothing was sent)", e.Field, safetext.String(e.Value))
}

// checkUTF8 finds the first text of in that is not valid UTF-8.
func checkUTF8(in api.InstructionRequest) error {
	return notUTF8("", reflect.ValueOf(in))
}

// notUTF8 walks v's strings: struct fields under their JSON names, map
// keys and values, slice elements, what pointers and interfaces hold.
func notUTF8(field string, v reflect.Value) error {
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return &NotUTF8Error{Field: field, Value: v.String()}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return notUTF8(field, v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := notUTF8(field, v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if err := notUTF8(field, it.Key()); err != nil {
				return err
			}
			if err := notUTF8(field, it.Value()); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				if err := notUTF8(jsonName(f), v.Field(i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// jsonName is a struct field's name in JSON.
func jsonName(f reflect.StructField) string {
	if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
		return name
	}
	return f.Name
}
