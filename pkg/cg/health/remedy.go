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
	// RemedyPartitionLayout: recreate the group with the partition layout
	// (one single-filter consumer per partition).
	RemedyPartitionLayout RemedyCode = "partition-layout"
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
	// Op is the refused operation ("add", "drop"), when the fix names it.
	Op string
	// Filters are the group's partitioning filters ("orders.*:1"), for
	// RemedyRepairWorkStreamJoin.
	Filters []string
}

// The remedies engine errors carry (see Error).
const (
	// RemedyMinimalOrDeleteMappings: a membership change (Op: "add" or
	// "drop") on a group with member mappings needs the minimal option,
	// or the mappings deleted first.
	RemedyMinimalOrDeleteMappings RemedyCode = "minimal-or-delete-mappings"
	// RemedyDeleteGroup: the group can never be consumed; delete it.
	RemedyDeleteGroup RemedyCode = "delete-group"
	// RemedyRecreateStreamAndGroup: a static member's stream was deleted;
	// recreate the stream and the group, or delete the group.
	RemedyRecreateStreamAndGroup RemedyCode = "recreate-stream-and-group"
	// RemedyRestartMember: a static member's consumer could not be
	// recreated; start the member (Member) again.
	RemedyRestartMember RemedyCode = "restart-member"
	// RemedyRebuildWorkStream: an elastic group's work stream was deleted;
	// re-run the group's create, or delete the group.
	RemedyRebuildWorkStream RemedyCode = "rebuild-work-stream"
	// RemedyRepairWorkStreamJoin: the work stream sources the wrong
	// thing; re-run the group's create (MaxMembers, Filters) or recreate.
	RemedyRepairWorkStreamJoin RemedyCode = "repair-work-stream-join"
	// RemedyStreamTransformExample: the stream has no partitioning
	// subject transform; the fix is an example transform.
	RemedyStreamTransformExample RemedyCode = "stream-transform-example"
)

// Error is an engine error that carries its Remedy. Its text is Lead (what
// is wrong, the sentinel's text first when there is one), then Fix (the
// engine's wording of the fix, naming no command), then Remedy.Tail. It
// unwraps to the sentinel, so errors.Is still maps it; find it with
// errors.As to word the fix another way.
type Error struct {
	Err    error
	Fix    string
	Remedy Remedy
}

func (e *Error) Error() string { return e.Remedy.Lead + e.Fix + e.Remedy.Tail }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }
