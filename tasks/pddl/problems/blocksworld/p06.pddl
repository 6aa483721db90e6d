(define (problem blocksworld-p06)
  (:domain blocksworld)
  (:objects
    b1 b2 b3 b4 b5 - block
  )
  (:init
    (arm-empty)
    (clear b2)
    (clear b4)
    (on b1 b5)
    (on b4 b1)
    (on b5 b3)
    (on-table b2)
    (on-table b3)
  )
  (:goal (and
    (on b1 b3)
    (on b2 b5)
    (on b5 b1)
  )))
