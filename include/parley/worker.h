/*
 * The worker role's entry point: the supervisor forks and calls it, so the
 * two roles share no code but this declaration and the IPC contract.
 */
#ifndef PARLEY_WORKER_H
#define PARLEY_WORKER_H

struct config;
struct quota;

/* Runs a worker on its end of the IPC socket; never returns.  quota: the
 * host's shared counters (sessions created per address and subject). */
void	worker_main(struct config *conf, int slot, int ipc_fd,
	    struct quota *quota)
	    __attribute__((noreturn));

#endif
