package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
)

// TestTheVerdictOnEachObservationInEachMode is the rule of what Create may take, without a
// server: for each way a consumer can be found, in each stance the provider can be in, the act
// and the refusal's words, each refusal with the one prefix Create and Foresee both say; and
// where the verdict does not weigh what the role holds (weighsHoldings: a plan reads it only
// where it does), that holdings change neither.
func TestTheVerdictOnEachObservationInEachMode(t *testing.T) {
	d := definition{role: "letta", database: "letta", limit: 5, resource: "postgres"}
	text := func(r record) *string { s := r.text(); return &s }
	ours := record{V: recordVersion, Login: "letta", Resource: "postgres", Database: "letta", State: active}
	othersConsumer := record{V: recordVersion, Login: "bob", Resource: "postgres", Database: "bob", State: active}
	superuser := stance{powers: powersOf(ModeSuperuser, 180000, "novox"), adopt: AdoptPlain, self: "novox"}
	delegated15 := stance{powers: powersOf(ModeDelegated, 150000, "novox"), adopt: AdoptPlain, self: "novox"}
	delegated16 := stance{powers: powersOf(ModeDelegated, 160000, "novox"), adopt: AdoptPlain, self: "novox"}
	strict := stance{powers: superuserPowers, adopt: AdoptNone, self: "novox"}
	vetRefused := invalid(errors.New("setting work_mem: invalid value"))

	plain := func(o *observed) { *o = observed{role: true, login: true, forever: true, limit: -1} }
	for name, tc := range map[string]struct {
		found  func(*observed)
		stance stance
		vet    error
		act    ports.Act
		says   string // the refusal's whole text, where it refuses
	}{
		"nothing exists":                    {func(o *observed) {}, superuser, nil, ports.ActCreate, ""},
		"a database to adopt":               {func(o *observed) { o.database, o.owner = false, "" }, superuser, nil, ports.ActCreate, ""},
		"held":                              {func(o *observed) { o.role, o.comment = true, text(ours) }, superuser, nil, ports.ActNone, ""},
		"held, delegated":                   {func(o *observed) { o.role, o.comment = true, text(ours) }, delegated16, nil, ports.ActNone, ""},
		"a plain role":                      {plain, superuser, nil, ports.ActAdopt, ""},
		"a plain role, delegated before 16": {plain, delegated15, nil, ports.ActAdopt, ""},
		"a plain role it administers":       {func(o *observed) { plain(o); o.admin = true }, delegated16, nil, ports.ActAdopt, ""},
		"a plain role it does not administer": {plain, delegated16, nil, ports.ActRefuse,
			"create role letta: role letta exists, the provider did not make it, and the provider's role novox has no ADMIN option on it " +
				"(from PostgreSQL 16 a role that is not a superuser alters only the roles it administers); it is not taken over: to have " +
				`it adopted, as a superuser: GRANT "letta" TO "novox" WITH ADMIN OPTION, INHERIT FALSE, SET FALSE`},
		"a plain role, adoption off": {plain, strict, nil, ports.ActRefuse,
			"create role letta: role letta exists and the provider did not make it; it is not taken over (adoption is off)"},
		"a superuser": {func(o *observed) { plain(o); o.attributes = []string{"a superuser"} }, superuser, nil, ports.ActRefuse,
			"create role letta: role letta exists, the provider did not make it, and it is a superuser; it is not taken over"},
		"the owner of another database": {func(o *observed) { plain(o); o.owns = []string{"finance"} }, superuser, nil, ports.ActRefuse,
			"create role letta: role letta exists, the provider did not make it, and it is the owner of finance; it is not taken over"},
		"another provider's": {func(o *observed) {
			o.role, o.comment = true, text(record{V: recordVersion, Login: "letta", Resource: "mysql", State: active})
		}, superuser, nil, ports.ActRefuse,
			`create role letta: role letta is managed by the provider of "mysql", not "postgres"; it is not taken over`},
		"a copied record": {func(o *observed) { o.role, o.comment = true, text(othersConsumer) }, superuser, nil, ports.ActRefuse,
			"create role letta: role letta carries the provider's record of bob: it was renamed, or the record copied; " +
				"it is not the provider's and is never repaired, withdrawn or dropped"},
		"renamed away": {func(o *observed) {
			o.others, o.otherComments = []string{"letta_old"}, []string{*text(ours)}
		}, superuser, nil, ports.ActRefuse,
			`create role letta: letta is now the role letta_old (renamed; letta_old carries the provider's record of letta); it is ` +
				`not made again beside it: rename it back (ALTER ROLE "letta_old" RENAME TO "letta"), or take the record off letta_old ` +
				`(COMMENT ON ROLE "letta_old" IS NULL) to have letta made anew`},
		"another provider's record elsewhere": {func(o *observed) {
			o.others, o.otherComments = []string{"x"}, []string{*text(record{V: recordVersion, Login: "letta", Resource: "mysql"})}
		}, superuser, nil, ports.ActCreate, ""},
		"a database another consumer has": {func(o *observed) {
			o.database, o.owner, o.ownerComment = true, "bob", text(othersConsumer)
		}, superuser, vetRefused, ports.ActRefuse, // before the settings
			"create database letta: consumer bob has it; one database is never given to two consumers"},
		"settings refused": {func(o *observed) { plain(o); o.attributes = []string{"a superuser"} }, superuser, vetRefused, ports.ActRefuse,
			"settings of letta in letta: setting work_mem: invalid value"}, // before the role's own refusal
		"a database another role owns": {func(o *observed) { o.database, o.owner = true, "bob" }, superuser, nil, ports.ActRefuse,
			`create database letta: the database exists and is owned by "bob", not "letta"; it is not handed over`},
		"a plain role and a database another owns": {func(o *observed) { plain(o); o.database, o.owner = true, "bob" }, superuser, nil, ports.ActRefuse,
			`create database letta: the database exists and is owned by "bob", not "letta"; it is not handed over`},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			var o observed
			tc.found(&o)
			v := d.decide(o, tc.stance, tc.vet)
			is.Equal(v.act, tc.act)
			if !d.weighsHoldings(o, tc.stance) { // a plan reads none of what the role holds: it must not matter
				held := o
				held.owns, held.ownsIn, held.grantedIn = append(o.owns, "finance"), []string{"finance"}, []string{""}
				h := d.decide(held, tc.stance, tc.vet)
				is.Equal(h.act, v.act)
				is.Equal(h.refusal == nil, v.refusal == nil)
				if v.refusal != nil {
					is.Equal(h.refusal.Error(), v.refusal.Error())
				}
			}
			if tc.says == "" {
				is.NoErr(v.refusal)
				return
			}
			is.True(v.refusal != nil)
			is.Equal(v.refusal.Error(), tc.says)
			is.True(ports.IsRefusal(v.refusal) || strings.Contains(tc.says, "carries the provider's record of")) // a refusal, not server trouble
		})
	}
}

// TestAHeldRoleKeepsItsRecord: the verdict on the provider's own role carries the record it
// holds, from which Create writes the next one.
func TestAHeldRoleKeepsItsRecord(t *testing.T) {
	is := is.New(t)
	d := definition{role: "letta", database: "letta", resource: "postgres"}
	had := record{V: recordVersion, Login: "letta", Resource: "postgres", Database: "old", Databases: []string{"letta", "old"}, State: active}
	text := had.text()
	v := d.decide(observed{role: true, comment: &text}, stance{adopt: AdoptPlain}, nil)
	is.Equal(v.act, ports.ActNone)
	is.Equal(v.had.Databases, []string{"letta", "old"})
}

// TestTheVerdictCarriesWhatCreateChanges: the verdict names what Create changes of the role and
// its database, and the mode chooses among them: only a provider that acts through a
// membership grants itself a way into the consumer's database.
func TestTheVerdictCarriesWhatCreateChanges(t *testing.T) {
	is := is.New(t)
	d := definition{role: "letta", database: "letta", limit: 5, resource: "postgres"}
	o := asMade(d)
	o.limit, o.provides, o.open = 3, false, []string{"PUBLIC"}
	kinds := func(v verdict) (out []kind) {
		for _, c := range v.changes {
			out = append(out, c.kind)
		}
		return out
	}
	superuser := d.decide(o, stance{adopt: AdoptPlain}, nil)
	is.Equal(superuser.act, ports.ActNone)
	is.Equal(kinds(superuser), []kind{limitDiffers, openToOthers}) // a superuser needs no grant
	delegated := d.decide(o, stance{powers: powersOf(ModeDelegated, 150000, "novox"), adopt: AdoptPlain}, nil)
	is.Equal(kinds(delegated), []kind{limitDiffers, openToOthers, closedToProvider})
	is.Equal(d.decide(asMade(d), stance{adopt: AdoptPlain}, nil).changes, nil) // as made: nothing
	refused := d.decide(observed{database: true, owner: "bob"}, stance{}, nil)
	is.Equal(refused.changes, nil) // a refusal changes nothing
}

// TestTheInsideVerdictOnEachReading is what a create does inside a consumer's database, without
// a server, for each way its schema and extensions can be found, in each mode: the schema
// another role owns refuses it in the words the create says, naming who must own it; otherwise
// the schema is written where it is not as the provider writes it, each extension is made or
// left where it is installed, in the entry's order, an update is weighed only where one is
// installed, and the search_path is written only where the role lacks it.
func TestTheInsideVerdictOnEachReading(t *testing.T) {
	consumer, super := "letta", "postgres"
	vector := extension{name: "vector", version: "0.8.1"}
	trgm := extension{name: "pg_trgm", version: "1.6"}
	asWritten := schemaSeen{owner: &super, ownerFit: true, closed: true, asWritten: true}
	for name, tc := range map[string]struct {
		in         inside
		mode       Mode
		hasPath    bool
		refusal    string
		schema     bool
		each       []insideAct
		weigh      bool
		searchPath bool
	}{
		"a new database": {in: inside{}, mode: ModeSuperuser, schema: true, searchPath: true,
			each: []insideAct{{x: vector}, {x: trgm}}},
		"as the provider left it": {in: inside{schema: asWritten, present: map[string]string{"vector": extensionSchema, "pg_trgm": extensionSchema}},
			mode: ModeSuperuser, hasPath: true, weigh: true,
			each: []insideAct{{x: vector, installed: true, in: extensionSchema}, {x: trgm, installed: true, in: extensionSchema}}},
		"one installed in public, one to make": {in: inside{schema: asWritten, present: map[string]string{"pg_trgm": "public"}},
			mode: ModeSuperuser, hasPath: true, weigh: true,
			each: []insideAct{{x: vector}, {x: trgm, installed: true, in: "public"}}},
		"a grant the provider does not write": {in: inside{schema: schemaSeen{owner: &super, ownerFit: true, closed: true}},
			mode: ModeSuperuser, hasPath: true, schema: true, each: []insideAct{{x: vector}, {x: trgm}}},
		"the consumer's schema": {in: inside{schema: schemaSeen{owner: &consumer, closed: true, asWritten: true}}, mode: ModeSuperuser,
			refusal: "create extensions in letta: schema extensions exists and is owned by letta, not by a superuser: extensions are not created where others may create objects"},
		"the consumer's schema, delegated": {in: inside{schema: schemaSeen{owner: &consumer}}, mode: ModeDelegated,
			refusal: "create extensions in letta: schema extensions exists and is owned by letta, not by the provider's role novox: extensions are not created where others may create objects"},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			v := tc.in.verdict("letta", []extension{vector, trgm}, powersOf(tc.mode, 170000, "novox").schemaOwner, tc.hasPath)
			if tc.refusal != "" {
				is.True(ports.IsRefusal(v.refusal))
				is.Equal(v.refusal.Error(), tc.refusal)
				is.Equal(len(v.each), 0) // nothing is made where it is refused
				return
			}
			is.NoErr(v.refusal)
			is.Equal(v.schema, tc.schema)
			is.Equal(v.each, tc.each)
			is.Equal(v.weigh, tc.weigh)
			is.Equal(v.searchPath, tc.searchPath)
		})
	}
}

// TestTheModeOfTheProvidersRole is how the provider's role's standing on the server decides
// its mode, without a server: a superuser whatever else holds; else delegated where it may
// create roles and databases and the server would log none of its verifiers; else refused,
// naming what it lacks or the settings that would log.
func TestTheModeOfTheProvidersRole(t *testing.T) {
	for name, tc := range map[string]struct {
		super, createRole, createDB bool
		loud                        []string
		mode                        Mode
		says                        string
	}{
		"a superuser":                          {super: true, mode: ModeSuperuser},
		"a superuser on a server that logs":    {super: true, loud: []string{"log_statement = all"}, mode: ModeSuperuser},
		"delegated":                            {createRole: true, createDB: true, mode: ModeDelegated},
		"without CREATEDB":                     {createRole: true, says: "is not a superuser and lacks CREATEDB, so it can neither"},
		"without CREATEROLE":                   {createDB: true, says: "is not a superuser and lacks CREATEROLE, so it can neither"},
		"without both":                         {says: "lacks CREATEROLE and CREATEDB, so it can neither"},
		"on a server that would log verifiers": {createRole: true, createDB: true, loud: []string{"log_statement = all", "pg_stat_statements.track = all"}, says: "logs what the provider would send it (log_statement = all, pg_stat_statements.track = all)"},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			mode, err := modeOf(tc.super, tc.createRole, tc.createDB, tc.loud, "novox@127.0.0.1:5432", "novox")
			is.Equal(mode, tc.mode)
			if tc.says == "" {
				is.NoErr(err)
				return
			}
			is.True(err != nil && strings.Contains(err.Error(), tc.says))                          // says what is wrong
			is.True(strings.HasPrefix(err.Error(), "the server novox@127.0.0.1:5432"))             // names the server
			is.True(strings.Contains(err.Error(), "the provider's role novox is not a superuser")) // and the role
		})
	}
}
