(define (problem blocksworld-p03)
  (:domain blocksworld)
  (:objects
    b1 b2 b3 b4 - block
  )
  (:init
    (arm-empty)
    (clear b2)
    (clear b3)
    (clear b4)
    (on b4 b1)
    (on-table b1)
    (on-table b2)
    (on-table b3)
  )
  (:goal (and
    (on b1 b4)
    (on b3 b1)
  )))
