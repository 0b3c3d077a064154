// The comparison of what the server holds of a consumer (observed) with its definition: typed
// changes, each with the word an operator reads, made here and nowhere else.

package postgres

import (
	"slices"
	"strings"
)

// kind is one way a consumer on the server differs from its definition.
type kind int

const (
	roleMissing kind = iota
	notRecorded      // the role is not recorded as this provider's
	recordWithdrawn
	recordFormat // written before the record named its login
	loginOff
	powersOn
	roleExpired
	roleValidUntil
	memberOf  // subject: the role it is a member of ("postgres through finance")
	grantedTo // subject: the role that is a member of it
	passwordStale
	limitDiffers
	databaseMissing
	ownerDiffers
	openToOthers
	closedToProvider
	connectionsOff
	isTemplate
	settingSet   // subject: the setting's name
	settingReset // subject: the setting's name
	searchPathUnset
	schemaUnsafe
	extensionMissing // subject: the extension's name
)

// change is one difference between a consumer on the server and its definition, and what
// Create does about it.
type change struct {
	kind    kind
	subject string // the role, setting or extension it is about, where the kind names one
}

// about is what a kind of change is to an operator and to Create: its word as a check says it;
// where it is of the role's own standing (standingChanges), the words that bar taking a role
// over that differs so, following "it is" (unadoptable; its word where it has none of its own);
// and the statement of Create's that makes it. In both words, %s is the change's subject.
type about struct {
	word, barring string
	writer        writer
}

// kinds is every kind's words and writer, in one place.
var kinds = [...]about{
	roleMissing:      {word: "role missing"},
	notRecorded:      {word: "not recorded as the provider's"},
	recordWithdrawn:  {word: "recorded withdrawn"},
	recordFormat:     {word: "record format"},
	loginOff:         {word: "login", barring: "not a login role", writer: roleWriter},
	powersOn:         {word: "powers", writer: roleWriter},
	roleExpired:      {word: "expired", writer: roleWriter},
	roleValidUntil:   {word: "valid until", barring: "valid only until a date", writer: roleWriter},
	memberOf:         {word: "member of %s", barring: "a member of %s", writer: membershipWriter},
	grantedTo:        {word: "granted to %s", writer: membershipWriter},
	passwordStale:    {word: "password", writer: roleWriter},
	limitDiffers:     {word: "connection limit", writer: roleWriter},
	databaseMissing:  {word: "database missing"},
	ownerDiffers:     {word: "owner"},
	openToOthers:     {word: "open to others", writer: databaseWriter},
	closedToProvider: {word: "closed to the provider", writer: databaseWriter},
	connectionsOff:   {word: "connections not allowed", writer: databaseWriter},
	isTemplate:       {word: "a template", writer: databaseWriter},
	settingSet:       {word: "setting %s", writer: settingWriter},
	settingReset:     {word: "setting %s (reset)", writer: settingWriter},
	searchPathUnset:  {word: "search_path setting"},
	schemaUnsafe:     {word: "extensions schema"},
	extensionMissing: {word: "extension %s missing"},
}

// word is the change as a check says it.
func (c change) word() string { return c.say(c.kind.about().word, "unknown") }

// barring is a change of the role's own standing (standingChanges) as what bars taking the
// role over, in words that follow "it is" (unadoptable); a kind without words of its own bars it
// by its word.
func (c change) barring() string { return c.say(c.kind.about().barring, c.word()) }

// say is words with the change's subject in place of %s, or otherwise where there are none.
func (c change) say(words, otherwise string) string {
	if words == "" {
		return otherwise
	}
	return strings.Replace(words, "%s", c.subject, 1)
}

// about is what kinds says of k; nothing for a kind it does not list (no words, written
// elsewhere).
func (k kind) about() about {
	if int(k) >= len(kinds) {
		return about{}
	}
	return kinds[k]
}

// words are the changes as a check says them; nil where there are none.
func words(cs []change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.word())
	}
	return out
}

// adoptionWords are what taking over a role changes, from what a comparison of it found: the
// record is written on it, a database missing is made, and what else differs is set as the
// definition says.
func (d definition) adoptionWords(cs []change) []string {
	out := make([]string, 0, len(cs)+1)
	recorded := false
	for _, c := range cs {
		switch c.kind {
		case notRecorded:
			out, recorded = append(out, "comment (the record)"), true
		case databaseMissing:
			out = append(out, "database "+d.database+" created")
		default:
			out = append(out, c.word())
		}
	}
	if !recorded {
		out = append(out, "comment (the record)")
	}
	return out
}

// writer is the statement of Create's that makes a change (apply.go).
type writer int

const (
	writtenElsewhere writer = iota // the record and the extensions: written by their own step
	roleWriter                     // CREATE or ALTER ROLE, with the password where it is stale (writeRole)
	membershipWriter               // every membership either way revoked (revokeMemberships)
	databaseWriter                 // who may connect, connections allowed, no template (closeAndOpen)
	settingWriter                  // ALTER ROLE ... IN DATABASE ... SET or RESET, one a setting (writeSettings)
)

// writer is the statement that makes a change of kind k: each kind is made by one (kinds).
func (k kind) writer() writer { return k.about().writer }

// writes is whether a change of cs is made by w.
func writes(cs []change, w writer) bool {
	return slices.ContainsFunc(cs, func(c change) bool { return c.kind.writer() == w })
}

// hasKind is whether cs holds a change of one of kinds.
func hasKind(cs []change, kinds ...kind) bool {
	for _, c := range cs {
		for _, k := range kinds {
			if c.kind == k {
				return true
			}
		}
	}
	return false
}

// changes is how the consumer o differs from d, for a provider of powers p, in the order a
// check says it; nil where it does not: the one comparison a check, a plan and Create's
// verdict make. The extensions, inside the database, are compared apart (inDatabase).
func (d definition) changes(o observed, p powers) []change {
	if !o.role {
		return []change{{kind: roleMissing}}
	}
	cs := d.roleChanges(o)
	if !o.database {
		return append(cs, change{kind: databaseMissing})
	}
	return append(cs, d.databaseChanges(o, p)...)
}

// roleChanges is how the role, which exists, differs from d: its record, its attributes and
// memberships, its password and its limit.
func (d definition) roleChanges(o observed) []change {
	var cs []change
	switch r, ok := parseRecord(o.comment); {
	case !ok || r.Resource != d.resource || foreign(d.role, r) != "":
		cs = append(cs, change{kind: notRecorded})
	case r.State != active:
		cs = append(cs, change{kind: recordWithdrawn})
	case r.V < recordVersion:
		cs = append(cs, change{kind: recordFormat})
	}
	cs = append(cs, standingChanges(o)...)
	if !o.verifies {
		cs = append(cs, change{kind: passwordStale})
	}
	if o.limit != d.limit {
		cs = append(cs, change{kind: limitDiffers})
	}
	return cs
}

// standingChanges is how the role's own attributes and memberships differ from the definition.
func standingChanges(s observed) []change {
	var cs []change
	if !s.login {
		cs = append(cs, change{kind: loginOff})
	}
	if len(s.attributes) > 0 {
		cs = append(cs, change{kind: powersOn})
	}
	switch {
	case s.expired:
		cs = append(cs, change{kind: roleExpired})
	case !s.forever:
		cs = append(cs, change{kind: roleValidUntil})
	}
	for _, g := range s.memberOf {
		cs = append(cs, change{kind: memberOf, subject: g})
	}
	for _, g := range s.grantedTo {
		cs = append(cs, change{kind: grantedTo, subject: g})
	}
	return cs
}

// databaseChanges is how the database, which exists, differs from d, as a provider of powers
// p makes it: its owner, who may connect to it, whether it accepts connections or is a
// template, and the role's settings in it. A provider that is a superuser may always connect
// and create, and keeps no grant of its own on it.
func (d definition) databaseChanges(o observed, p powers) []change {
	var cs []change
	if o.owner != d.role {
		cs = append(cs, change{kind: ownerDiffers})
	}
	if len(o.open) > 0 {
		cs = append(cs, change{kind: openToOthers})
	}
	if !o.provides && p.asMember {
		cs = append(cs, change{kind: closedToProvider})
	}
	if !o.allowed {
		cs = append(cs, change{kind: connectionsOff})
	}
	if o.template {
		cs = append(cs, change{kind: isTemplate})
	}
	return append(cs, d.settingChanges(o.setconfig)...)
}

// settingChanges is how the role's settings in its database, as pg_db_role_setting holds them
// ("name=value"), differ from d's; a setting d does not name is left alone, and no change.
func (d definition) settingChanges(setconfig []string) []change {
	var cs []change
	for _, s := range d.settings {
		if c, ok := s.change(setconfig); ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// change is how setconfig differs from s, where it does.
func (s setting) change(setconfig []string) (change, bool) {
	at := slices.IndexFunc(setconfig, func(c string) bool { return strings.HasPrefix(c, s.name+"=") })
	switch {
	case s.value == nil && at >= 0:
		return change{kind: settingReset, subject: s.name}, true
	case s.value != nil && (at < 0 || setconfig[at] != s.name+"="+*s.value):
		return change{kind: settingSet, subject: s.name}, true
	}
	return change{}, false
}
