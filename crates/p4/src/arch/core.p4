/* edgeflow's core library: what P4-16 defines for every target, as much of it as the subset
 * edgeflow compiles uses (docs/p4.md). Written for edgeflow; the names and signatures are the
 * language's own, so programs written for other targets read the same. */

/* The name programs test with #ifdef to know the core library is there. */
#define _CORE_P4_

error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

extern packet_in {
    /* Fills a header from the frame and marks it valid; a frame too short fails the parser
     * with error.PacketTooShort. */
    void extract<T>(out T hdr);
    /* Fills a header with a varbit field, that field taking the next sizeInBits bits:
     * error.HeaderTooShort where they are more than its varbit holds, and
     * error.ParserInvalidArgument where they are not whole bytes (as BMv2). */
    void extract<T>(out T hdr, in bit<32> sizeInBits);
    T lookahead<T>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

extern packet_out {
    /* Writes a header back to the frame if it is valid. */
    void emit<T>(in T hdr);
}

/* Fails the parser with `toSignal` unless `check` holds. */
extern void verify(in bool check, in error toSignal);

/* A condition the compiler proves: a compile-time bool, an error with the message where it
 * is false; true where it holds (so that it can initialise a constant). The one-argument
 * form is the same without a message. */
extern bool static_assert(bool check, string message);

action NoAction() {}

match_kind {
    exact,
    ternary,
    lpm
}
