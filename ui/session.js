// Who the signed-in caller is and what it may do, from GET /v1/me
// ({actor, role, tenant_id, permissions, expires_at}): the page shows only
// what the credential's role and tenant allow (the API checks every
// request anyway; this keeps forbidden buttons and pages off the screen).

import { get } from "./api.js";

/** The signed-in caller. */
export class Session {
  constructor(me) {
    this.actor = me.actor;
    this.role = me.role;
    this.tenantId = me.tenant_id ?? null;
    this.expiresAt = me.expires_at ?? null;
    this.permissions = new Set(me.permissions || []);
  }

  /** Reads GET /v1/me (and checks the credential on the way). */
  static async load() {
    return new Session(await get("/v1/me"));
  }

  /**
   * Whether the caller may do `what`: a permission of GET /v1/me (read,
   * recover, manage_subscriptions, …) or one of the page's own views
   * below, which the portal leaves out to stay about its tenant's
   * endpoints and deliveries.
   */
  can(what) {
    switch (what) {
      case "overview": return this.permissions.has("read") && !this.portal;
      case "audit": return this.permissions.has("read") && !this.portal;
      case "replays": return this.permissions.has("recover") && !this.portal;
      default: return this.permissions.has(what);
    }
  }

  /** Whether this is a subscriber's portal (a tenant's portal token). */
  get portal() {
    return this.role === "portal";
  }

  /** One line for the header. */
  describe() {
    if (this.portal) return `Portal of ${this.tenantId}`;
    return `${this.actor} · ${this.role}${this.tenantId ? " · tenant " + this.tenantId : ""}`;
  }
}
