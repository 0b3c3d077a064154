package postgres_test

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/adapters/postgres"
	"github.com/novox/postgres-provider/ports"
	"github.com/novox/postgres-provider/tests/pgserver"
)

// versionOf is the installed version of ext in db, "" where it is not installed.
func (e *env) versionOf(db, ext string) string {
	e.t.Helper()
	var v string
	_ = e.admin(db).QueryRow(ctx, "SELECT extversion::text FROM pg_extension WHERE extname = $1", ext).Scan(&v)
	return v
}

func (e *env) defaultVersion(ext string) string {
	e.t.Helper()
	var v string
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, "SELECT default_version::text FROM pg_available_extensions WHERE name = $1", ext).Scan(&v))
	return v
}

// pinned is p asking for ext at version ("" for the server's default).
func pinned(p ports.Provision, ext, version string) ports.Provision {
	p.Values = map[string]any{"name": p.Values["name"], "extensions": []any{map[string]any{"name": ext, "version": version}}}
	if version == "" {
		p.Values["extensions"] = []any{ext}
	}
	return p
}

func (e *env) mustHold(p ports.Provision) ports.Holding {
	e.t.Helper()
	h, err := holdsOne(ctx, e.b, p)
	is.New(e.t).NoErr(err)   // checked
	is.New(e.t).True(h.Held) // held: a version to update to is not drift
	return h
}

// A consumer's pg_trgm created at 1.4, as an earlier server would have: the check names it in
// the same batched check, Create leaves it until the loop lets it update, then updates it to
// the server's default.
func TestAnExtensionOlderThanTheServersDefaultIsUpdatedWhenLet(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("trgm"), "pg_trgm")
	e.mustCreate(p)
	e.exec(p.As, "DROP EXTENSION pg_trgm", "CREATE EXTENSION pg_trgm VERSION '1.4' SCHEMA extensions")
	def := e.defaultVersion("pg_trgm")
	is.True(def != "1.4") // the server's default is newer

	h := e.mustHold(p)
	key := "extension pg_trgm -> " + def
	is.Equal(len(h.Updates), 1)
	u := h.Updates[0]
	is.Equal([]string{u.Key, u.Subject, u.From, u.To, u.Word, u.Step, u.Refused},
		[]string{key, "extension pg_trgm", "1.4", def, "extension pg_trgm 1.4, wanted " + def, "update pg_trgm 1.4 -> " + def, ""})
	f := e.b.Foresee(ctx, []ports.Provision{p}, postgres.DefaultTimeout)
	is.NoErr(f[0].Err)
	is.Equal(f[0].Act, ports.ActNone)  // nothing else to do
	is.Equal(f[0].Updates[0].Key, key) // but the update, which the plan shows

	e.mustCreate(p)
	is.Equal(e.versionOf(p.As, "pg_trgm"), "1.4") // not let: left as it is
	p.Updates = []string{key}
	act, err := e.b.Create(ctx, p)
	is.NoErr(err)
	is.Equal(act, ports.ActRepair)
	is.Equal(e.versionOf(p.As, "pg_trgm"), def) // updated
	h = e.mustHold(p)
	is.Equal(len(h.Updates), 0)
	is.Equal(h.Has, []string{key}) // and held at it
}

// A pinned version is created and kept where the server's default is newer; a later pin
// updates to it.
func TestAPinIsKeptAndALaterPinUpdatesToIt(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := pinned(provision(name("pin")), "pg_trgm", "1.4")
	e.mustCreate(p)
	is.Equal(e.versionOf(p.As, "pg_trgm"), "1.4") // created at the pin
	h := e.mustHold(p)
	is.Equal(len(h.Updates), 0)
	is.Equal(h.Has, []string{"extension pg_trgm -> 1.4"}) // kept, not due the default

	p = pinned(p, "pg_trgm", "1.5")
	h = e.mustHold(p)
	is.Equal(h.Updates[0].Step, "update pg_trgm 1.4 -> 1.5")
	p.Updates = []string{h.Updates[0].Key}
	e.mustCreate(p)
	is.Equal(e.versionOf(p.As, "pg_trgm"), "1.5") // updated to the later pin
}

// A pin older than what is installed, a version the server does not have, and a version with
// no update path are each refused for that extension, saying why, and never tried.
func TestADowngradeAMissingPathAndAnUnknownVersionAreRefused(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := pinned(provision(name("down")), "pg_trgm", "1.5")
	e.mustCreate(p)
	p = pinned(p, "pg_trgm", "1.4")
	h := e.mustHold(p)
	is.Equal(h.Updates[0].Refused, "1.4 is older than the installed 1.5: an extension is never downgraded")
	p.Updates = []string{h.Updates[0].Key}
	e.mustCreate(p)
	is.Equal(e.versionOf(p.As, "pg_trgm"), "1.5") // never downgraded

	ext := "novox_nopath_" + run
	e.srv.InstallExtension(e.t, map[string]string{
		ext + ".control":  "comment = 'no update path, for the tests of the provider'\ndefault_version = '1.1'\nrelocatable = true\n",
		ext + "--1.0.sql": "CREATE FUNCTION novox_nopath_one() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
		ext + "--1.1.sql": "CREATE FUNCTION novox_nopath_one() RETURNS int LANGUAGE sql AS 'SELECT 11';\n",
	})
	q := pinned(provision(name("nopath")), ext, "1.0")
	e.mustCreate(q)
	q = pinned(q, ext, "")
	h = e.mustHold(q)
	is.Equal(h.Updates[0].Refused, "the server has no update path from 1.0 to 1.1")
	q.Updates = []string{h.Updates[0].Key}
	e.mustCreate(q)
	is.Equal(e.versionOf(q.As, ext), "1.0") // not tried

	r := pinned(provision(name("unknown")), "pg_trgm", "9.9")
	e.mustCreate(r)
	e.mustCreate(r)
	is.Equal(e.versionOf(r.As, "pg_trgm"), "") // not created at a version the server has not
	n := 0
	for _, line := range e.log.said() {
		if strings.HasPrefix(line, r.As+": extension pg_trgm is pinned at 9.9, which this server does not have") {
			n++
		}
	}
	is.Equal(n, 1) // said once over two creates
	h = e.mustHold(r)
	is.True(strings.HasPrefix(h.Updates[0].Refused, "the server has no version 9.9 of pg_trgm")) // refused, not drift
}

// An update whose script fails leaves the version that was (one transaction), and is Create's
// *ports.UpdateFailed with the server's reason; the rest of the consumer stands.
func TestAFailedUpdateKeepsTheVersionItHad(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	ext := "novox_fail_" + run
	e.srv.InstallExtension(e.t, pgserver.ThreeVersions(ext, true))
	p := pinned(provision(name("fail")), ext, "1.1")
	p.Values["extensions"] = append(p.Values["extensions"].([]any), "pg_trgm")
	e.mustCreate(p)
	p.Values["extensions"] = []any{ext, "pg_trgm"}
	h := e.mustHold(p)
	is.Equal(h.Updates[0].Word, "extension "+ext+" 1.1, wanted 1.2")
	p.Updates = []string{h.Updates[0].Key}
	_, err := e.b.Create(ctx, p)
	var failed *ports.UpdateFailed
	is.True(errors.As(err, &failed))            // the update's failure, told apart
	is.Equal(failed.Reason, "division by zero") // the server's reason
	is.Equal(failed.Update.Key, "extension "+ext+" -> 1.2")
	is.Equal(e.versionOf(p.As, ext), "1.1")                 // kept the version it had
	is.True(slices.Contains(e.extensions(p.As), "pg_trgm")) // the rest stands
	is.True(e.mustHold(p).Held)
}

// An extension the entry no longer names stays, and the check says so.
func TestAnExtensionNoLongerNamedIsKept(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := provision(name("kept"), "pg_trgm", "fuzzystrmatch")
	e.mustCreate(p)
	p.Values["extensions"] = []any{"pg_trgm"}
	e.mustCreate(p)
	is.True(slices.Contains(e.extensions(p.As), "fuzzystrmatch")) // never dropped
	is.Equal(e.mustHold(p).Kept, []string{"extension fuzzystrmatch kept: no longer named, never dropped"})
}

// An update whose script would search, as a superuser, a schema the consumer can create in (the
// extension's own, or that of an extension it requires) is refused, saying which, and never
// tried: the consumer's planted function would run with the superuser's rights. The version
// wanted may require what the installed one did not.
func TestAnUpdateSearchingASchemaTheConsumerWritesIsRefused(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	p := pinned(provision(name("ownschema")), "pg_trgm", "1.4")
	e.mustCreate(p)
	e.exec(p.As, "DROP EXTENSION pg_trgm", "CREATE SCHEMA app AUTHORIZATION "+p.As, "CREATE EXTENSION pg_trgm VERSION '1.4' SCHEMA app")
	p = pinned(p, "pg_trgm", "1.5")
	h := e.mustHold(p)
	is.Equal(h.Updates[0].Refused, "its update script would run as a superuser searching schema app, where others may create objects "+
		"(drop it to have it made again in extensions)")
	p.Updates = []string{h.Updates[0].Key}
	e.mustCreate(p)
	is.Equal(e.versionOf(p.As, "pg_trgm"), "1.4") // not tried

	ext := "novox_req_" + run
	e.srv.InstallExtension(e.t, map[string]string{
		ext + ".control":       "comment = 'requires cube from 1.1, for the tests of the provider'\ndefault_version = '1.1'\nrelocatable = true\n",
		ext + "--1.1.control":  "requires = 'cube'\n",
		ext + "--1.0.sql":      "CREATE FUNCTION novox_req_one() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
		ext + "--1.0--1.1.sql": "CREATE OR REPLACE FUNCTION novox_req_one() RETURNS int LANGUAGE sql AS 'SELECT 11';\n",
	})
	q := pinned(provision(name("reqschema")), "pg_trgm", "")
	e.mustCreate(q)
	e.exec(q.As, "CREATE SCHEMA app AUTHORIZATION "+q.As, "CREATE EXTENSION cube SCHEMA app",
		"CREATE EXTENSION "+ext+" VERSION '1.0' SCHEMA extensions")
	q.Values["extensions"] = []any{"pg_trgm", ext}
	h = e.mustHold(q)
	is.Equal(len(h.Updates), 1)
	is.Equal(h.Updates[0].Refused, "its update script would run as a superuser searching schema app, where others may create objects "+
		"(drop it to have it made again in extensions)") // the schema of cube, which 1.1 requires
	q.Updates = []string{h.Updates[0].Key}
	e.mustCreate(q)
	is.Equal(e.versionOf(q.As, ext), "1.0") // not tried
}

// offerStamp is the server's list of the extensions it has and their default versions, as a
// create compares it with what it kept.
func (e *env) offerStamp() string {
	e.t.Helper()
	var s string
	is.New(e.t).NoErr(e.admin("").QueryRow(ctx, "SELECT string_agg(name || ' ' || coalesce(default_version, ''), ',' ORDER BY name) "+
		"FROM pg_available_extensions").Scan(&s))
	return s
}

// oneVersion are the files of an extension ext with one version, 1.0, its default.
func oneVersion(ext string) map[string]string {
	return map[string]string{
		ext + ".control":  "comment = 'one version, for the tests of the provider'\ndefault_version = '1.0'\nrelocatable = true\n",
		ext + "--1.0.sql": "CREATE FUNCTION " + ext + "_one() RETURNS int LANGUAGE sql AS 'SELECT 1';\n",
	}
}

// Creates read what the server offers of every extension once while its list of them holds,
// and again where an extension was installed meanwhile: the new one is created, not lacked.
func TestCreatesReadWhatTheServerOffersOnceWhileItsListHolds(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	before := e.offerStamp()
	e.mustCreate(provision(name("offer"), "pg_trgm"))
	is.Equal(e.b.OfferReads(), 1) // the first create reads it
	second := provision(name("offer"), "pg_trgm")
	e.mustCreate(second)
	if e.offerStamp() == before { // another test binary may install one meanwhile
		is.Equal(e.b.OfferReads(), 1) // the second takes the kept read
	}
	is.Equal(e.versionOf(second.As, "pg_trgm"), e.defaultVersion("pg_trgm")) // and creates from it

	ext := "novox_offer_" + run
	e.srv.InstallExtension(e.t, oneVersion(ext))
	third := provision(name("offer"), ext)
	e.mustCreate(third)
	is.Equal(e.versionOf(third.As, ext), "1.0") // the list changed: read again, and created
}

// A stamp read serves the creates that follow it for a second, where the kept read lists what
// they name; after it, the stamp is read again; and an extension the kept read does not list
// has it read at once: one installed meanwhile is created, not lacked.
func TestAStampServesTheCreatesThatFollowItForASecond(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	var clock atomic.Int64 // nanoseconds, set by the test
	clock.Store(time.Now().UnixNano())
	e.b.SetOfferClock(func() time.Time { return time.Unix(0, clock.Load()) })
	e.mustCreate(provision(name("stamp"), "pg_trgm"))
	is.Equal(e.b.OfferStamps(), 1) // the first create reads the stamp
	is.Equal(e.b.OfferReads(), 1)  // and all the server offers
	second := provision(name("stamp"), "pg_trgm")
	e.mustCreate(second)
	is.Equal(e.b.OfferStamps(), 1) // the second, within the second, reads neither
	is.Equal(e.b.OfferReads(), 1)
	is.Equal(e.versionOf(second.As, "pg_trgm"), e.defaultVersion("pg_trgm")) // and creates from the kept read

	clock.Add(int64(time.Second))
	e.mustCreate(provision(name("stamp"), "pg_trgm"))
	is.Equal(e.b.OfferStamps(), 2) // a second later, the stamp is read again

	ext := "novox_stamp_" + run
	e.srv.InstallExtension(e.t, oneVersion(ext))
	fourth := provision(name("stamp"), ext)
	e.mustCreate(fourth) // within the second of the last stamp, naming what the kept read lacks
	is.Equal(e.b.OfferStamps(), 3)
	is.Equal(e.versionOf(fourth.As, ext), "1.0") // read again, and created
}

// A version pinned that the kept read does not list, because the server gained it without its
// default changing, is asked of the server again, and created.
func TestAPinTheKeptReadDoesNotListIsAskedOfTheServer(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	ext := "novox_later_" + run
	e.srv.InstallExtension(e.t, oneVersion(ext))
	first := provision(name("later"), ext)
	e.mustCreate(first)
	is.Equal(e.versionOf(first.As, ext), "1.0")
	e.srv.InstallExtension(e.t, map[string]string{ // the default, and so the list, unchanged
		ext + "--1.1.sql": "CREATE FUNCTION " + ext + "_one() RETURNS int LANGUAGE sql AS 'SELECT 11';\n",
	})
	second := pinned(provision(name("later")), ext, "1.1")
	e.mustCreate(second)
	is.Equal(e.versionOf(second.As, ext), "1.1") // not skipped as a version the server lacks
}
