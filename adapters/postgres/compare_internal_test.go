package postgres

import (
	"testing"

	"github.com/matryer/is"
)

// asMade is a consumer exactly as the definition d says, recorded as the provider's.
func asMade(d definition) observed {
	text := record{V: recordVersion, Login: d.role, Resource: d.resource, Database: d.database, State: active}.text()
	return observed{role: true, login: true, forever: true, comment: &text, limit: d.limit,
		verifies: true, database: true, owner: d.role, allowed: true, provides: true}
}

func TestAConsumerAsMadeHasNoChanges(t *testing.T) {
	is := is.New(t)
	d := definition{role: "letta", database: "letta", limit: 5, resource: "postgres"}
	is.Equal(d.changes(asMade(d), superuserPowers), nil) // nothing differs
	is.Equal(d.changes(asMade(d), powersOf(ModeDelegated, 160000, "provider")), nil)
}

// TestASuperuserIsNeverClosedOut: a provider that is a superuser keeps no grant of its own on a
// consumer's database, so a database it may not connect to by a grant is no drift of its;
// one that acts through a membership must keep its CONNECT and CREATE there.
func TestASuperuserIsNeverClosedOut(t *testing.T) {
	is := is.New(t)
	d := definition{role: "letta", database: "letta", limit: 5, resource: "postgres"}
	o := asMade(d)
	o.provides = false
	is.Equal(d.changes(o, superuserPowers), nil)
	is.Equal(d.changes(o, powersOf(ModeDelegated, 150000, "provider")), []change{{kind: closedToProvider}})
}

func TestEachDifferenceIsOneChangeInTheWordsACheckSays(t *testing.T) {
	on := "on"
	d := definition{role: "letta", database: "app", limit: 5, resource: "postgres",
		settings: []setting{{name: "work_mem", value: &on}, {name: "jit"}}}
	withdrawnRecord := record{V: recordVersion, Login: "letta", Resource: "postgres", State: withdrawn}.text()
	oldRecord := record{Resource: "postgres", State: active}.text()
	othersRecord := record{V: recordVersion, Login: "letta", Resource: "mysql", State: active}.text()
	renamedRecord := record{V: recordVersion, Login: "other", Resource: "postgres", State: active}.text()
	for name, tc := range map[string]struct {
		change func(*observed)
		words  []string
		kinds  []kind
	}{
		"role missing":       {func(o *observed) { *o = observed{} }, []string{"role missing"}, []kind{roleMissing}},
		"database missing":   {func(o *observed) { o.database = false }, []string{"database missing"}, []kind{databaseMissing}},
		"no record":          {func(o *observed) { o.comment = nil }, []string{"not recorded as the provider's"}, []kind{notRecorded}},
		"another's record":   {func(o *observed) { o.comment = &othersRecord }, []string{"not recorded as the provider's"}, []kind{notRecorded}},
		"a renamed record":   {func(o *observed) { o.comment = &renamedRecord }, []string{"not recorded as the provider's"}, []kind{notRecorded}},
		"withdrawn":          {func(o *observed) { o.comment = &withdrawnRecord }, []string{"recorded withdrawn"}, []kind{recordWithdrawn}},
		"an old record":      {func(o *observed) { o.comment = &oldRecord }, []string{"record format"}, []kind{recordFormat}},
		"no login":           {func(o *observed) { o.login = false }, []string{"login"}, []kind{loginOff}},
		"a superuser":        {func(o *observed) { o.attributes = []string{"a superuser"} }, []string{"powers"}, []kind{powersOn}},
		"expired":            {func(o *observed) { o.expired, o.forever = true, false }, []string{"expired"}, []kind{roleExpired}},
		"valid until a date": {func(o *observed) { o.forever = false }, []string{"valid until"}, []kind{roleValidUntil}},
		"memberships": {func(o *observed) {
			o.memberOf, o.grantedTo = []string{"postgres through finance"}, []string{"intruder"}
		},
			[]string{"member of postgres through finance", "granted to intruder"}, []kind{memberOf, grantedTo}},
		"password":         {func(o *observed) { o.verifies = false }, []string{"password"}, []kind{passwordStale}},
		"connection limit": {func(o *observed) { o.limit = -1 }, []string{"connection limit"}, []kind{limitDiffers}},
		"owner":            {func(o *observed) { o.owner = "postgres" }, []string{"owner"}, []kind{ownerDiffers}},
		"open":             {func(o *observed) { o.open = []string{"PUBLIC"} }, []string{"open to others"}, []kind{openToOthers}},
		"closed":           {func(o *observed) { o.provides = false }, []string{"closed to the provider"}, []kind{closedToProvider}},
		"not allowed":      {func(o *observed) { o.allowed = false }, []string{"connections not allowed"}, []kind{connectionsOff}},
		"a template":       {func(o *observed) { o.template = true }, []string{"a template"}, []kind{isTemplate}},
		"settings": {func(o *observed) { o.setconfig = []string{"work_mem=off", "jit=off", "other=1"} },
			[]string{"setting work_mem", "setting jit (reset)"}, []kind{settingSet, settingReset}},
		"a setting missing": {func(o *observed) { o.setconfig = nil }, []string{"setting work_mem"}, []kind{settingSet}},
		"a role missing has nothing else": {func(o *observed) { o.role, o.database, o.verifies = false, false, false },
			[]string{"role missing"}, []kind{roleMissing}},
		"a database missing has no settings": {func(o *observed) { o.database, o.setconfig = false, nil },
			[]string{"database missing"}, []kind{databaseMissing}},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			o := asMade(d)
			o.setconfig = []string{"work_mem=on"}
			tc.change(&o)
			// As a provider that keeps grants of its own on the database sees it.
			cs := d.changes(o, powersOf(ModeDelegated, 160000, "provider"))
			is.Equal(words(cs), tc.words) // the words a check says
			kinds := make([]kind, len(cs))
			for i, c := range cs {
				kinds[i] = c.kind
			}
			is.Equal(kinds, tc.kinds) // one typed change each
		})
	}
}

func TestAdoptionSaysTheRecordIsWrittenAndTheDatabaseMade(t *testing.T) {
	is := is.New(t)
	d := definition{role: "letta", database: "app", resource: "postgres"}
	is.Equal(d.adoptionWords(nil), []string{"comment (the record)"}) // a role as made gets the record
	is.Equal(d.adoptionWords([]change{{kind: notRecorded}, {kind: limitDiffers}, {kind: databaseMissing}}),
		[]string{"comment (the record)", "connection limit", "database app created"}) // in the comparison's order, the record once
}

func TestTheRecordKeepsTheDatabasesTheRoleStillOwns(t *testing.T) {
	is := is.New(t)
	d := definition{role: "letta", database: "new", resource: "postgres", derived: map[string]any{"database": "new"}}
	had := record{V: recordVersion, Login: "letta", Resource: "postgres", Database: "old", Databases: []string{"gone", "old"}, State: withdrawn}
	r := d.record(had, []string{"old"})
	is.Equal(r.Databases, []string{"new", "old"}) // the one asked for, and the one it still owns; not the one gone
	is.Equal(r.State, active)                     // Create makes it active
	is.Equal(r.Login, "letta")                    // on the role it is written on
}

// TestEachDriftCreateRepairsHasItsWriter: every kind of drift of the role or its database that
// Create repairs in place is made by one statement of apply.go, and the rest by their own step.
func TestEachDriftCreateRepairsHasItsWriter(t *testing.T) {
	is := is.New(t)
	for k, w := range map[kind]writer{
		loginOff: roleWriter, powersOn: roleWriter, roleExpired: roleWriter, roleValidUntil: roleWriter,
		limitDiffers: roleWriter, passwordStale: roleWriter,
		memberOf: membershipWriter, grantedTo: membershipWriter,
		openToOthers: databaseWriter, closedToProvider: databaseWriter, connectionsOff: databaseWriter, isTemplate: databaseWriter,
		roleMissing: writtenElsewhere, notRecorded: writtenElsewhere, databaseMissing: writtenElsewhere, ownerDiffers: writtenElsewhere,
		settingSet: settingWriter, settingReset: settingWriter, searchPathUnset: writtenElsewhere, extensionMissing: writtenElsewhere,
	} {
		is.Equal(k.writer(), w) // change{kind: k}.word() is made by the writer named
	}
	is.True(writes([]change{{kind: passwordStale}}, roleWriter))
	is.True(!writes([]change{{kind: passwordStale}}, databaseWriter))
}

// The provider's schema in a consumer's database is judged by one definition (schemaSeen): the
// check's safe, and the create's ownedByAnother and toWrite, over one reading of it.
func TestTheSchemaIsJudgedByOneDefinition(t *testing.T) {
	owner := "postgres"
	for _, row := range []struct {
		name                   string
		seen                   schemaSeen
		safe, refused, written bool
	}{
		{"absent: made", schemaSeen{}, false, false, true},
		{"as the provider writes it", schemaSeen{owner: &owner, ownerFit: true, closed: true, asWritten: true}, true, false, false},
		{"safe, but with a grant the provider does not write", schemaSeen{owner: &owner, ownerFit: true, closed: true}, true, false, true},
		{"open to the consumer's creates: written again", schemaSeen{owner: &owner, ownerFit: true}, false, false, true},
		{"another's, even closed", schemaSeen{owner: &owner, closed: true, asWritten: true}, false, true, false},
	} {
		t.Run(row.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(row.seen.safe(), row.safe)              // the check
			is.Equal(row.seen.ownedByAnother(), row.refused) // the create refuses it
			is.Equal(row.seen.toWrite(), row.written)        // the create writes it
		})
	}
}

// What bars adopting a role is what a check finds drifted in its own standing, by one rule
// (standingChanges): each such drift bars it, in words that follow "it is", the first found
// first, and a role with none of them (and nothing elsewhere) may be adopted.
func TestWhatBarsAnAdoptionIsTheRolesStandingDrift(t *testing.T) {
	plain := func() observed { return observed{role: true, login: true, forever: true} }
	for _, row := range []struct {
		name string
		set  func(o *observed)
		says string
	}{
		{"as the provider would have made it", func(o *observed) {}, ""},
		{"a power", func(o *observed) { o.attributes = []string{"allowed to create databases"} }, "allowed to create databases"},
		{"a power, and no login: the power first", func(o *observed) {
			o.attributes, o.login = []string{"a superuser"}, false
		}, "a superuser"},
		{"no login", func(o *observed) { o.login = false }, "not a login role"},
		{"expired", func(o *observed) { o.expired, o.forever = true, false }, "expired"},
		{"valid until a date", func(o *observed) { o.forever = false }, "valid only until a date"},
		{"a member", func(o *observed) { o.memberOf = []string{"postgres through finance"} }, "a member of postgres through finance"},
		{"granted", func(o *observed) { o.grantedTo = []string{"intruder"} }, "granted to intruder"},
		{"no login and a member: as the check lists them", func(o *observed) {
			o.login, o.memberOf = false, []string{"finance"}
		}, "not a login role"},
	} {
		t.Run(row.name, func(t *testing.T) {
			is := is.New(t)
			o := plain()
			row.set(&o)
			is.Equal(unadoptable(o, "letta"), row.says)
			is.Equal(row.says == "", len(standingChanges(o)) == 0) // barred exactly where the check finds drift
		})
	}
}

// Every kind of change has its words (kinds): the word a check says, with its subject, and,
// for the role's own standing, what bars an adoption; a kind added without them fails here.
func TestEachKindOfChangeHasItsWords(t *testing.T) {
	is := is.New(t)
	is.Equal(len(kinds), int(extensionMissing)+1) // one entry each, the last kind included
	for k := range kinds {
		is.True(change{kind: kind(k), subject: "s"}.word() != "unknown") // each has a word
	}
	for _, row := range []struct {
		c             change
		word, barring string
	}{
		{change{kind: loginOff}, "login", "not a login role"},
		{change{kind: roleExpired}, "expired", "expired"},
		{change{kind: roleValidUntil}, "valid until", "valid only until a date"},
		{change{kind: memberOf, subject: "postgres through finance"}, "member of postgres through finance", "a member of postgres through finance"},
		{change{kind: grantedTo, subject: "intruder"}, "granted to intruder", "granted to intruder"},
		{change{kind: settingReset, subject: "work_mem"}, "setting work_mem (reset)", "setting work_mem (reset)"},
		{change{kind: extensionMissing, subject: "vector"}, "extension vector missing", "extension vector missing"},
		{change{kind: memberOf, subject: "a%sb"}, "member of a%sb", "a member of a%sb"}, // a subject is said as it is
		{change{kind: kind(len(kinds))}, "unknown", "unknown"},
	} {
		is.Equal(row.c.word(), row.word)
		is.Equal(row.c.barring(), row.barring)
	}
}
