/*
 * The worker role's entry point: the supervisor forks and calls it, so the
 * two roles share no code but this declaration and the IPC contract.
 */
#ifndef PARLEY_WORKER_H
#define PARLEY_WORKER_H

struct config;

/* Runs a worker on its end of the IPC socket; never returns. */
void	worker_main(struct config *conf, int slot, int ipc_fd)
	    __attribute__((noreturn));

#endif
