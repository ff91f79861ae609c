"""The ground floor: what every app shares (errors, settings typing, crypto, validators, locks, the API's
shared parts). It imports nothing of the project; every other package may import it."""
