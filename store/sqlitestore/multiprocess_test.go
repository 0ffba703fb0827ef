package sqlitestore_test

func claimerMain() int { return 0 }

const helperEnv = "SQLITESTORE_TEST_CLAIMER"
