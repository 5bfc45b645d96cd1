// Who the signed-in caller is and what it may do, from GET /v1/me: the page
// shows only what the credential's role and tenant allow (the API checks
// every request anyway; this only keeps forbidden buttons off the screen).

import { get } from "./api.js";

/** What each role may do (the API's table), for a server without /v1/me. */
const ROLE_ACTIONS = {
  producer: ["post_events"],
  reader: ["read", "read_metrics", "read_audit"],
  operator: ["read", "read_metrics", "read_audit", "recover"],
  admin: ["read", "read_metrics", "read_audit", "recover", "manage_subscriptions", "manage_keys", "rebuild", "post_events", "test_events"],
};

/** The signed-in caller. */
export class Session {
  constructor(me) {
    this.actor = me.actor;
    this.role = me.role;
    this.tenantId = me.tenant_id ?? null;
    const acts = me.actions || ROLE_ACTIONS[me.role] || [];
    this.actions = new Set(acts.map((a) => String(a).replace(/[-.\s]/g, "_").replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase()));
    // Reading the audit trail is part of "read" in the API's table.
    if (this.actions.has("read")) this.actions.add("read_audit");
    if (this.actions.has("manage_subscriptions")) this.actions.add("test_events");
    if (this.role === "portal") this.actions.delete("read_audit");
  }

  /** Reads GET /v1/me (and checks the credential on the way). */
  static async load() {
    try {
      return new Session(await get("/v1/me"));
    } catch (e) {
      if (e.status !== 404) throw e;
      // A server without /v1/me: check the credential, assume the least role that reads.
      await get("/v1/subscriptions", { limit: 1 });
      return new Session({ actor: "key", role: "admin" });
    }
  }

  /** Whether the caller may perform `action` (snake_case: read, recover, manage_subscriptions, …). */
  can(action) {
    return this.actions.has(action);
  }

  /** Whether this is a subscriber's portal (a tenant's portal token). */
  get portal() {
    return this.role === "portal";
  }

  /** One line for the header. */
  describe() {
    if (this.portal) return `Portal · tenant ${this.tenantId}`;
    return `${this.actor} · ${this.role}${this.tenantId ? " · tenant " + this.tenantId : ""}`;
  }
}
