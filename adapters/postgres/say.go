// What the adapter says to the operator, through the Logger port, and the facts of a consumer it
// tells for the loop to say once (ports.Once).

package postgres

import (
	"fmt"
	"log/slog"

	"github.com/novox/postgres-provider/ports"
)

// voice is how the adapter speaks: a line said each time, or a fact of a consumer told each
// time it is found, which the loop says once while it holds (domain.Told keeps what was said,
// and forgets it with the consumer).
type voice struct{ log ports.Logger }

// say says a line each time.
func (v voice) say(level slog.Level, consumer, format string, args ...any) {
	if v.log != nil {
		v.log.Log(ports.Entry{Level: level, Consumer: consumer, Message: fmt.Sprintf(format, args...)})
	}
}

// once tells the fact k as it stands (fact), in the line format says: said the first time, and
// again only once the fact changes, or after it was over (over).
func (v voice) once(k sayKey, fact string, level slog.Level, format string, args ...any) {
	if v.log != nil {
		v.log.Log(ports.Entry{Level: level, Consumer: k.consumer, Message: fmt.Sprintf(format, args...),
			Once: &ports.Once{About: string(k.topic), Subject: k.subject, Fact: fact, Outlives: k.topic.kept()}})
	}
}

// over tells that the fact k no longer holds: should it come back, it is said again.
func (v voice) over(k sayKey) {
	if v.log != nil {
		v.log.Log(ports.Entry{Consumer: k.consumer, Once: &ports.Once{About: string(k.topic), Subject: k.subject, Outlives: k.topic.kept()}})
	}
}

// found is a fact of a consumer a step of an act found and answers as a value, for the act to
// tell (voice.tell) once the step is done: one that holds as fact, said once in its line while it
// does; with no line, one that no longer holds; or, each, what the step did, said each time.
type found struct {
	key  sayKey
	fact string
	line string // "": it no longer holds
	each bool   // said each time (an event, not a state): its key names only the consumer
}

// facts are the facts one act found, in the order it found them.
type facts []found

// holds adds that k holds as fact, said (a warning) in the line format says.
func (fs *facts) holds(k sayKey, fact, format string, args ...any) {
	*fs = append(*fs, found{key: k, fact: fact, line: fmt.Sprintf(format, args...)})
}

// over adds that k no longer holds.
func (fs *facts) over(k sayKey) { *fs = append(*fs, found{key: k}) }

// did adds what a step did to the consumer, said (a warning) each time, in the line format says.
func (fs *facts) did(consumer, format string, args ...any) {
	*fs = append(*fs, found{key: sayKey{consumer: consumer}, line: fmt.Sprintf(format, args...), each: true})
}

// tell tells the facts fs, in their order, and empties fs.
func (v voice) tell(fs *facts) {
	for _, f := range *fs {
		if f.each {
			v.say(slog.LevelWarn, f.key.consumer, "%s", f.line)
			continue
		}
		if f.line == "" {
			v.over(f.key)
			continue
		}
		v.once(f.key, f.fact, slog.LevelWarn, "%s", f.line)
	}
	*fs = nil
}

// topic is what a fact told of a consumer is about; with its subject (an extension, a grant, a
// lock), it keys what the loop remembers having said. Every fact the adapter tells has its
// topic here, and whether a withdrawal forgets it.
type topic string

const (
	// Told by a create or a check of the consumer, and forgotten with it once it is withdrawn
	// or dropped: listed again, it is said again.
	extensionSkipped  topic = "extension skipped"   // not allowed here, or not available (the fact says which); subject: the extension
	extensionInPublic topic = "extension in public" // installed where the consumer can write; subject: the extension
	extensionRefused  topic = "extension refused"   // the server refused to create it; subject: the extension
	extensionPin      topic = "extension pin"       // pinned at a version the server lacks; subject: the extension
	extensionUpdate   topic = "extension update"    // the server refused its update; subject: the extension
	membershipKept    topic = "membership kept"     // a membership the provider may not revoke; subject: the grant
	lockHolderEnded   topic = "lock holder ended"   // what held its lock was ended; subject: whose, and which lock

	// Told by a withdrawal, or of a record, and kept when the consumer is forgotten: every
	// retry of a withdrawal would say them again.
	recordForeign topic = "record foreign" // its role's record is not this provider's (the fact says why)
	recordUpgrade topic = "record upgrade" // its withdrawn record could not be rewritten in the current format
	signalLacked  topic = "signal lacked"  // the provider may not end its sessions
)

// kept is whether what was said of t outlives the consumer's withdrawal.
func (t topic) kept() bool {
	return t == recordForeign || t == recordUpgrade || t == signalLacked
}

// sayKey is one fact told of a consumer: of which consumer, about what.
type sayKey struct {
	consumer string
	topic    topic
	subject  string
}
