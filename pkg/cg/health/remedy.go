package health

// RemedyCode names the fix a finding or an error calls for. The engine
// words each fix without naming any command line (its Hint); a front end
// turns the code and the Remedy's data into its own commands.
type RemedyCode string

// The remedies the engine suggests.
const (
	// RemedyListGroups: a named group does not exist; list the stream's
	// static and elastic groups (Stream).
	RemedyListGroups RemedyCode = "list-groups"
	// RemedyRecreateStreamOrDelete: the group's stream is gone; recreate
	// it or delete the group.
	RemedyRecreateStreamOrDelete RemedyCode = "recreate-stream-or-delete-group"
	// RemedyDeleteAndCreate: delete the group (Kind, Stream, Group) and
	// create it again. Lead comes before the fix, Tail after it.
	RemedyDeleteAndCreate RemedyCode = "delete-and-create"
	// RemedyRecreateInvalidConfig: the stored configuration is unusable;
	// delete the group and create it again.
	RemedyRecreateInvalidConfig RemedyCode = "recreate-invalid-config"
	// RemedyRecreateElastic: delete the elastic group and create it again.
	RemedyRecreateElastic RemedyCode = "recreate-elastic"
	// RemedyRepairWorkStreamSources: re-run the elastic group's create
	// (MaxMembers is its argument) to repair the work stream's sources.
	RemedyRepairWorkStreamSources RemedyCode = "repair-work-stream-sources"
	// RemedyRemakeWorkStream: re-run the elastic group's create to remake
	// a lost work stream.
	RemedyRemakeWorkStream RemedyCode = "remake-work-stream"
	// RemedyRepairWorkStreamSettings: re-run the elastic group's create
	// with its filters and caps to repair the work stream in place.
	RemedyRepairWorkStreamSettings RemedyCode = "repair-work-stream-settings"
	// RemedyWorkStreamNotOwned: the work stream's name is taken by a
	// stream cg did not make; delete the group (keeping the stream) and
	// create it under another name.
	RemedyWorkStreamNotOwned RemedyCode = "work-stream-not-owned"
	// RemedyAddMembers: partitions have no owner; add members to the
	// elastic group.
	RemedyAddMembers RemedyCode = "add-members"
	// RemedyStaticNoMembers: a static group's membership never changes;
	// recreate it with members.
	RemedyStaticNoMembers RemedyCode = "static-no-members"
	// RemedyStartMember: start an instance of Member.
	RemedyStartMember RemedyCode = "start-member"
	// RemedyUpgradeServer: the server (Server, "major.minor") refuses
	// whole-subject hashing; upgrade it, or recreate the group naming the
	// wildcards to hash.
	RemedyUpgradeServer RemedyCode = "upgrade-server"
)

// Remedy is the typed data of a fix: enough for a front end to name its
// own commands. Fields a code does not use are empty.
type Remedy struct {
	Code   RemedyCode
	Kind   string
	Stream string
	Group  string
	Member string
	// MaxMembers is an elastic group's member cap, the create argument.
	MaxMembers int
	// Server is the server's "major.minor", for RemedyUpgradeServer.
	Server string
	// Lead and Tail are engine wording before and after the fix itself
	// (" with at most 1000 partitions"); they name no command.
	Lead, Tail string
}
