package postgres

const workerEnv = "RUNSEAL_PG_AA_WORKER"

func activeActiveWorker() int { return 2 }
