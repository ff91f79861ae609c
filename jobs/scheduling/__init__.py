"""The scheduler: waiting jobs queue and start whole when they fit, fairly and by priority; the ledger accounts."""
