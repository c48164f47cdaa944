// sim_s4u: SimGrid state changes through S4U (sim_s4u.h).
#include <simgrid/kernel/ProfileBuilder.hpp>
#include <simgrid/s4u.hpp>
#include <cstdio>
#include <string>

#include "sim_s4u.h"

void sim_s4u_link_off(sg_link_t l) { l->turn_off(); }

void sim_s4u_host_scale(sg_host_t h, double scale)
{
    // one profile event at date 0, never repeated (periodicity -1), to 17 digits
    char event[64];
    std::snprintf(event, sizeof event, "0 %.17g\n", scale);
    auto *p = simgrid::kernel::profile::ProfileBuilder::from_string("loong-speed-" + h->get_name(), event, -1);
    h->set_speed_profile(p);
}

void sim_s4u_execute_on(sg_host_t h, double flops, double priority)
{
    simgrid::s4u::ExecPtr e = simgrid::s4u::this_actor::exec_init(flops);
    e->set_host(h);
    e->set_priority(priority);
    e->start();
    e->wait();
}

sg_comm_t sim_s4u_sendto_async(sg_host_t from, sg_host_t to, uint64_t bytes)
{
    // the reference the C API's sg_comm_wait* releases, as sg_mailbox_put_async does
    simgrid::s4u::CommPtr c = simgrid::s4u::Comm::sendto_async(from, to, bytes);
    c->add_ref();
    return c.get();
}
