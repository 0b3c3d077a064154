// What the provider makes of a consumer, as plain data: compared with what the server holds
// (compare.go), it says what a check calls drift, what a plan foresees and what Create writes.

package postgres

// definition is a consumer as the provider makes it: a role (LOGIN, no attributes, valid for
// ever, a member of no role and no role a member of it, standing.go) with the minted password
// and its connection limit, recorded as this provider's and active; a database it owns, that
// nobody else may connect to, that accepts connections and is no template; and the role's
// settings there.
type definition struct {
	role, database string
	limit          int
	settings       []setting
	resource       string         // the provider's, in the record
	derived        map[string]any // the entry's derived values, in the record
}

// define is the definition of the consumer w, for the provider of resource.
func define(w wanted, resource string) definition {
	return definition{role: w.role, database: w.database, limit: w.limit, settings: w.settings,
		resource: resource, derived: w.derived}
}
