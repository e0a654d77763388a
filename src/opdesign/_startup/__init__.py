"""Process start-up tweaks (one fenced place; each module says what it saves, measured)."""
