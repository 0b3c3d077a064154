package postgres

import (
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/novox/postgres-provider/ports"
)

func TestAnExtensionEntryIsANameOrANameAndAVersion(t *testing.T) {
	is := is.New(t)
	names, pins, err := extensionsRead(map[string]any{"extensions": []any{"vector", map[string]any{"name": "pg_trgm", "version": "1.5"},
		map[string]any{"name": "vector"}}})
	is.NoErr(err)
	is.Equal(names, []string{"vector", "pg_trgm"})      // in order, once each
	is.Equal(pins, map[string]string{"pg_trgm": "1.5"}) // only what is pinned
	for entry, says := range map[string]any{
		"values.extensions holds an entry with \"versoin\": an entry names only name and version":                         map[string]any{"name": "x", "versoin": "1"},
		"values.extensions holds an entry whose name is <nil>, not a string":                                              map[string]any{"version": "1"},
		"values.extensions: extension x: version is float64, not a string":                                                map[string]any{"name": "x", "version": 1.5},
		"values.extensions: extension x: version is empty (name it as a plain string for the server's default)":           map[string]any{"name": "x", "version": ""},
		"values.extensions: extension x: version \"1.0'; DROP\": only letters, digits, ., _ and - are allowed, not '\\''": map[string]any{"name": "x", "version": "1.0'; DROP"},
		"values.extensions: extension x: version \"1--2\" holds --, which no version can":                                 map[string]any{"name": "x", "version": "1--2"},
		"extension \"a b\": only letters, digits, _ and - are allowed, not ' '":                                           map[string]any{"name": "a b"},
	} {
		_, _, err := extensionsRead(map[string]any{"extensions": []any{says}})
		is.True(err != nil)
		is.Equal(err.Error(), entry) // refused, saying why
	}
	_, _, err = extensionsRead(map[string]any{"extensions": []any{"x", map[string]any{"name": "x", "version": "2"}}})
	is.Equal(err.Error(), "values.extensions names x twice, at the server's default and at 2") // one version per extension
}

func TestWhatIsDoneAboutAnInstalledExtension(t *testing.T) {
	is := is.New(t)
	for _, c := range []struct {
		x       installed
		due     bool
		refused string
	}{
		{installed{name: "v", version: "1", want: "1"}, false, ""},
		{installed{name: "v", version: "", want: "1", known: true}, false, ""}, // missing: drift, not an update
		{installed{name: "v", version: "1", want: "2", known: true, path: true}, true, ""},
		{installed{name: "v", version: "2", want: "1", known: true, back: true}, true, "1 is older than the installed 2: an extension is never downgraded"},
		{installed{name: "v", version: "1", want: "2", known: true}, true, "the server has no update path from 1 to 2"},
		{installed{name: "v", version: "1", want: "9", offer: "1, 2"}, true, "the server has no version 9 of v (it has 1, 2)"},
		{installed{name: "v", version: "1", want: "2", known: true, path: true, unsafe: "public"}, true,
			"its update script would run as a superuser searching schema public, where others may create objects (drop it to have it made again in extensions)"},
		{installed{name: "v", version: "", want: "9", offer: "1, 2"}, true, "the server has no version 9 of v (it has 1, 2)"},
	} {
		u, due := c.x.change()
		is.Equal(due, c.due)
		is.Equal(u.Refused, c.refused)
	}
}

func TestAnObservedExtensionIsJudgedAgainstWhatTheServerOffers(t *testing.T) {
	is := is.New(t)
	o := offered{versions: []string{"1.0", "1.1", "1.2"}, requires: map[string][]string{"1.2": {"cube", "plpgsql"}},
		paths: map[[2]string]bool{{"1.0", "1.1"}: true, {"1.1", "1.2"}: true, {"1.0", "1.2"}: true}}
	in := map[string]string{"cube": "public", "plpgsql": "pg_catalog", "v": "extensions"}
	for _, c := range []struct {
		seen seenInstalled
		want installed
	}{
		// Held: nothing of the server's is asked.
		{seenInstalled{installed: installed{name: "v", version: "1.2", want: "1.2"}}, installed{name: "v", version: "1.2", want: "1.2"}},
		// Missing: whether the server has the version wanted, and what it has.
		{seenInstalled{installed: installed{name: "v", want: "1.2"}}, installed{name: "v", want: "1.2", known: true, offer: "1.0, 1.1, 1.2"}},
		{seenInstalled{installed: installed{name: "v", want: "9"}}, installed{name: "v", want: "9", offer: "1.0, 1.1, 1.2"}},
		// An update: its path, and the schemas its script searches, the required cube's among
		// them; the catalog and the provider's schema are not the consumer's.
		{seenInstalled{installed: installed{name: "v", version: "1.1", want: "1.2"}, own: []string{"extensions"}, schemas: in},
			installed{name: "v", version: "1.1", want: "1.2", known: true, path: true, offer: "1.0, 1.1, 1.2", unsafe: "public"}},
		{seenInstalled{installed: installed{name: "v", version: "1.0", want: "1.1"}, own: []string{"extensions", "app", "app"}, schemas: in},
			installed{name: "v", version: "1.0", want: "1.1", known: true, path: true, offer: "1.0, 1.1, 1.2", unsafe: "app"}},
		// Older than installed: the way back is seen, so the refusal says so.
		{seenInstalled{installed: installed{name: "v", version: "1.1", want: "1.0"}, own: []string{"extensions"}},
			installed{name: "v", version: "1.1", want: "1.0", known: true, back: true, offer: "1.0, 1.1, 1.2"}},
	} {
		is.Equal(c.seen.against(o), c.want)
	}
}

// TestWhatACreateRequiresIsJudgedAgainstWhatIsInstalled: the schemas a create's script would
// search beside the catalog and the provider's are those of the installed extensions it
// requires, directly or through those CASCADE makes at their default versions; and a create
// cascades where something it requires is not installed.
func TestWhatACreateRequiresIsJudgedAgainstWhatIsInstalled(t *testing.T) {
	all := map[string]offered{
		"earthdistance": {def: "1.2", requires: map[string][]string{"1.1": {"plpgsql"}, "1.2": {"cube"}}},
		"cube":          {def: "1.5", requires: map[string][]string{"1.5": {"plpgsql"}}},
		"plain":         {def: "1", requires: map[string][]string{"1": nil}},
		"twofold":       {def: "1", requires: map[string][]string{"1": {"cube", "hstore", "cube"}}},
		"hstore":        {def: "1.8", requires: map[string][]string{"1.8": {"cube"}}},
		"fixedbase":     {def: "1", schemas: map[string]string{"1": "app"}},
		"onfixed":       {def: "1", requires: map[string][]string{"1": {"fixedbase"}}},
		"catalogbase":   {def: "1", schemas: map[string]string{"1": "pg_catalog"}},
		"oncatalog":     {def: "1", requires: map[string][]string{"1": {"catalogbase"}}},
	}
	for _, c := range []struct {
		what, name, version string
		installed           map[string]string
		schemas             []string
		cascades            bool
	}{
		{"a plain one", "plain", "1", map[string]string{"plpgsql": "pg_catalog"}, nil, false},
		{"its requirement in the catalog", "cube", "1.5", map[string]string{"plpgsql": "pg_catalog"}, nil, false},
		{"its requirement in the consumer's public", "earthdistance", "1.2", map[string]string{"cube": "public"}, []string{"public"}, false},
		{"its requirement in the provider's schema", "earthdistance", "1.2", map[string]string{"cube": extensionSchema}, nil, false},
		{"the version asked for decides", "earthdistance", "1.1", map[string]string{"cube": "public", "plpgsql": "pg_catalog"}, nil, false},
		{"through one CASCADE makes", "twofold", "1", map[string]string{"cube": "app"}, []string{"app"}, true},
		{"each schema once, sorted", "twofold", "1", map[string]string{"cube": "public", "hstore": "app"}, []string{"app", "public"}, false},
		{"not installed: cascades", "earthdistance", "1.2", map[string]string{"plpgsql": "pg_catalog"}, nil, true},
		{"a version the server lacks requires nothing", "cube", "9", map[string]string{}, nil, false},
		{"one the server lacks, required: cascades (and fails there)", "twofold", "1", map[string]string{}, nil, true},
		{"CASCADE would make one where its control file fixes", "onfixed", "1", map[string]string{}, []string{"app"}, true},
		{"CASCADE would make one in the catalog", "oncatalog", "1", map[string]string{}, nil, true},
		{"installed where its control file fixes: judged where it is", "onfixed", "1", map[string]string{"fixedbase": "app"}, []string{"app"}, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			is := is.New(t)
			schemas, cascades := requiredIn(all, c.installed, c.name, c.version)
			is.Equal(schemas, c.schemas)   // the schemas its script would search
			is.Equal(cascades, c.cascades) // whether it makes others
		})
	}
}

// A create's statement for one extension: in the provider's schema at the version judged, or
// where its control file fixes the catalog or the provider's schema; refused where its script
// would search a schema others may create objects in, its own or a requirement's.
func TestAnExtensionIsCreatedAtTheVersionJudgedOrRefused(t *testing.T) {
	all := map[string]offered{
		"earthdistance": {def: "1.2", requires: map[string][]string{"1.2": {"cube"}}},
		"cube":          {def: "1.5"},
	}
	for _, c := range []struct {
		what      string
		x         extension
		at        string
		installed map[string]string
		statement string
		cascades  bool
		refusal   string
	}{
		{"relocatable, at its version", extension{name: "cube"}, "1.5", nil,
			`CREATE EXTENSION IF NOT EXISTS "cube" SCHEMA "extensions" VERSION '1.5' CASCADE`, false, ""},
		{"no version known: the server's default", extension{name: "cube"}, "", nil,
			`CREATE EXTENSION IF NOT EXISTS "cube" SCHEMA "extensions" CASCADE`, false, ""},
		{"its control file fixes the catalog", extension{name: "cube", schema: "pg_catalog"}, "1.5", nil,
			`CREATE EXTENSION IF NOT EXISTS "cube" VERSION '1.5' CASCADE`, false, ""},
		{"its control file fixes the provider's schema", extension{name: "cube", schema: extensionSchema}, "1.5", nil,
			`CREATE EXTENSION IF NOT EXISTS "cube" VERSION '1.5' CASCADE`, false, ""},
		{"a requirement not installed: cascades", extension{name: "earthdistance"}, "1.2", map[string]string{},
			`CREATE EXTENSION IF NOT EXISTS "earthdistance" SCHEMA "extensions" VERSION '1.2' CASCADE`, true, ""},
		{"its control file fixes the consumer's public", extension{name: "cube", schema: "public"}, "1.5", nil,
			"", false, "its control file puts it in schema public, which the provider does not own"},
		{"a requirement in the consumer's public", extension{name: "earthdistance"}, "1.2", map[string]string{"cube": "public"},
			"", false, "it requires an extension installed, or made by CASCADE, in schema public, where others may create objects"},
	} {
		t.Run(c.what, func(t *testing.T) {
			is := is.New(t)
			statement, cascades, err := extensionSQL(all, c.installed, c.x, c.at)
			is.Equal(statement, c.statement) // what is sent
			is.Equal(cascades, c.cascades)   // whether it makes others
			if c.refusal == "" {
				is.NoErr(err)
				return
			}
			is.True(ports.IsRefusal(err))                      // a refusal, said as one
			is.True(strings.HasPrefix(err.Error(), c.refusal)) // in its words
		})
	}
}
