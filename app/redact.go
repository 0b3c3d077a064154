package app

import (
	"github.com/novox/postgres-provider/domain"
	"github.com/novox/postgres-provider/ports"
)

// redact is text with the passwords the backend's flags carry (its connection string's) removed,
// for a message about them: a parser or a driver may quote the string it was given. The backend
// says which they are (ports.Kind.Secrets); nil, flags not read, hides nothing.
func redact(text string, backend ports.Kind) string {
	if backend == nil {
		return text
	}
	for _, password := range backend.Secrets() {
		text = domain.Scrub(text, password)
	}
	return text
}
