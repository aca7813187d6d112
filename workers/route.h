/* Routing a connection's requests and messages to sessions. */
#ifndef PARLEY_WORKERS_ROUTE_H
#define PARLEY_WORKERS_ROUTE_H

struct conn_handler;

/* Given to conn_new: the REST endpoints and the streams' messages. */
extern const struct conn_handler route_handler;

#endif
