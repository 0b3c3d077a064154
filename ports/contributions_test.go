package ports_test

import (
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
)

func TestTheDatabaseIsDerivedElseNamedElseTheLogin(t *testing.T) {
	is := is.New(t)
	db, err := ports.Provision{As: "letta", Values: map[string]any{"name": "v"}, Derived: map[string]any{"database": "d"}}.Database()
	is.NoErr(err)
	is.Equal(db, "d") // derived.database wins
	db, _ = ports.Provision{As: "letta", Values: map[string]any{"name": "v"}, Derived: map[string]any{"database": ""}}.Database()
	is.Equal(db, "v") // an empty one names none
	db, _ = ports.Provision{As: "letta"}.Database()
	is.Equal(db, "letta") // neither: the login's
	_, err = ports.Provision{As: "letta", Values: map[string]any{"name": 3.0}}.Database()
	is.Equal(err.Error(), "values.name is float64, not a string") // the wrong type said
}

func TestExtensionsAreReadInOrderEachOnce(t *testing.T) {
	is := is.New(t)
	exts, err := ports.Provision{Values: map[string]any{"extensions": []any{"vector", map[string]any{"name": "pg_trgm", "version": "1.5"}, "vector"}}}.Extensions()
	is.NoErr(err)
	is.Equal(exts, []ports.Extension{{Name: "vector"}, {Name: "pg_trgm", Version: "1.5", Pinned: true}}) // in order, once each

	exts, err = ports.Provision{Values: map[string]any{"extensions": []any{"x", map[string]any{"name": "x", "version": "2"}}}}.Extensions()
	is.Equal(err.Error(), "values.extensions names x twice, at the server's default and at 2") // one name, two versions
	is.Equal(exts, []ports.Extension{{Name: "x"}, {Name: "x", Version: "2", Pinned: true}})    // up to and including what the error is about

	exts, err = ports.Provision{Values: map[string]any{"extensions": []any{"a", map[string]any{"name": "b", "version": 1.0}, "c"}}}.Extensions()
	is.Equal(err.Error(), "values.extensions: extension b: version is float64, not a string") // a version of the wrong type
	is.Equal(exts, []ports.Extension{{Name: "a"}, {Name: "b"}})                               // b got as far as its name

	exts, err = ports.Provision{Values: map[string]any{"extensions": []any{"x", map[string]any{"name": "x", "version": ""}}}}.Extensions()
	is.Equal(err.Error(), "values.extensions: extension x: version is empty (name it as a plain string for the server's default)") // said as such, not taken for the default
	is.Equal(exts, []ports.Extension{{Name: "x"}, {Name: "x"}})                                                                    // the second got as far as its name

	exts, err = ports.Provision{Values: map[string]any{"extensions": []any{"a", []any{"x\x1b"}}}}.Extensions()
	is.Equal(err.Error(), `values.extensions holds []interface {} "[x\x1b]", not a name`) // quoted: it comes from the file
	is.Equal(exts, []ports.Extension{{Name: "a"}})                                        // the item without a name left out

	exts, err = ports.Provision{}.Extensions()
	is.NoErr(err)
	is.True(exts == nil) // none named
}

func TestTheConnectionLimitIsAWholeNumber(t *testing.T) {
	is := is.New(t)
	n, named, err := ports.Provision{Derived: map[string]any{"connection_limit": 5.0}}.ConnectionLimit()
	is.NoErr(err)
	is.True(named)
	is.Equal(n, 5) // as named
	_, named, _ = ports.Provision{}.ConnectionLimit()
	is.True(!named) // none named: the backend's own
	_, _, err = ports.Provision{Derived: map[string]any{"connection_limit": 1.5}}.ConnectionLimit()
	is.Equal(err.Error(), "derived.connection_limit is 1.5, not a whole number of connections (-1 for no limit)") // refused
}

func TestSettingsAreReadByNameWithTheirValuesAsText(t *testing.T) {
	is := is.New(t)
	got, err := ports.Provision{Derived: map[string]any{"settings": map[string]any{"work_mem": "4MB", "jit": true, "b": 8.0, "a": nil}}}.Settings()
	is.NoErr(err)
	is.Equal(len(got), 4)
	is.Equal(got[0], ports.Setting{Name: "a"}) // null resets, and names come in order
	is.Equal(*got[1].Value, "8")               // a whole number in decimal
	is.Equal(*got[2].Value, "on")              // true as on
	is.Equal(*got[3].Value, "4MB")             // text as it is
	got, err = ports.Provision{Derived: map[string]any{"settings": map[string]any{"a": "x", "b": []any{}, "c": "y"}}}.Settings()
	is.Equal(err.Error(), "derived.settings: setting b is []interface {}, not a string, number, true/false or null") // which and why
	is.Equal(len(got), 2)                                                                                            // up to and including b
}
