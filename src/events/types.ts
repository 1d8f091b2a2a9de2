/** Every event type the log holds. */
export const EVENT_TYPES = [
  'asset.moved',
  'asset.created',
  'asset.updated',
  'asset.deleted',
  'location.created',
  'location.updated',
  'location.deleted',
  'tag.attached',
  'tag.detached',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** The scope a key needs to see an event: moves are tracking data, the rest the read scope of their kind. */
export function scopeOf(type: string, data: { owner_type?: string }): string {
  if (type === 'asset.moved') return 'tracking:read';
  if (type.startsWith('asset.')) return 'assets:read';
  if (type.startsWith('location.')) return 'locations:read';
  return data.owner_type === 'location' ? 'locations:read' : 'assets:read';
}

/** The scopes that show at least one kind of event. */
export const EVENT_SCOPES = ['tracking:read', 'assets:read', 'locations:read'];
